import { createHash } from "node:crypto";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import {
  ABSENT_CALLER_FILE,
  CHART_CALLER_FILES,
  chartJwksTokenFile,
  renderChartCallers,
} from "./chart-callers.js";
import { chartDefaults, helm, type K8sObject, renderChart, runHelm } from "./helm-cli.js";
import {
  CHART_DIR,
  mergeValues,
  renderChartConfig,
  type Values,
  validateWithLoader,
} from "./schema-tools.js";

const renderObjects = renderChart;

const examples = [
  "gateway-values.yaml",
  "gateway-redis-values.yaml",
  "gateway-redis-sentinel-values.yaml",
].map((f) => join(CHART_DIR, "examples", f));
/** Caller authorization; its config is checked in its own block (callers are chart-rendered). */
const callersExample = join(CHART_DIR, "examples", "gateway-callers-values.yaml");
const exampleName = (path: string): string => path.split("/").pop() ?? path;
const defaults = chartDefaults;
const withSecret = "existingSecret=creds";

interface Container {
  name: string;
  args?: string[];
  startupProbe?: { httpGet: { path: string; port: string | number } };
  livenessProbe?: { httpGet: { path: string; port: string | number } };
  readinessProbe?: { httpGet: { path: string; port: string | number } };
  lifecycle?: { preStop?: { sleep?: { seconds: number } } };
  securityContext?: Values;
}
interface PodSpec {
  terminationGracePeriodSeconds: number;
  automountServiceAccountToken: boolean;
  securityContext: Values;
  containers: Container[];
  initContainers?: Container[];
  volumes: ({ name: string } & Values)[];
}

function podSpecOf(objects: K8sObject[]): { spec: PodSpec; annotations: Record<string, string> } {
  const deployment = objects.find((o) => o.kind === "Deployment") as unknown as {
    spec: { template: { metadata: { annotations: Record<string, string> }; spec: PodSpec } };
  };
  return {
    spec: deployment.spec.template.spec,
    annotations: deployment.spec.template.metadata.annotations,
  };
}

function configMapText(objects: K8sObject[]): string {
  const cm = objects.find((o) => o.kind === "ConfigMap" && !o.metadata.name.endsWith("-dashboard"));
  return (cm as unknown as { data: Record<string, string> }).data["config.yaml"]!;
}

describe.skipIf(!helm)("helm render (helm binary found)", () => {
  it.each([
    ["values.yaml", [] as string[], [withSecret]],
    ...[...examples, callersExample].map((f): [string, string[], string[]] => [
      exampleName(f),
      [f],
      [],
    ]),
  ])("lints with %s", (_name, files, sets) => {
    const args = [
      "lint",
      CHART_DIR,
      ...files.flatMap((f) => ["-f", f]),
      ...sets.flatMap((s) => ["--set", s]),
    ];
    const result = runHelm(args);
    expect(result.stdout + result.stderr).toMatch(/0 chart\(s\) failed/);
    expect(result.status).toBe(0);
  });

  it.each(examples.map((f) => [exampleName(f), f]))(
    "renders %s into a config bearer-proxy accepts, as the tests model it",
    async (_name, file) => {
      const objects = renderObjects([file]);
      const text = configMapText(objects);
      expect(await validateWithLoader(text)).toEqual([]);
      const values = mergeValues(defaults, parse(readFileSync(file, "utf8")) as Values);
      expect(parse(text)).toEqual(renderChartConfig(values));
      // Pods roll when the config changes.
      expect(podSpecOf(objects).annotations["checksum/config"]).toBe(
        createHash("sha256").update(text.replace(/\n$/, "")).digest("hex"),
      );
    },
  );

  it("renders a hardened gateway pod with probes and a derived grace period", () => {
    const objects = renderObjects([], [withSecret]);
    expect(objects.map((o) => o.kind).sort()).toEqual(
      ["ConfigMap", "Deployment", "PodDisruptionBudget", "Service", "ServiceAccount"].sort(),
    );
    const { spec } = podSpecOf(objects);
    const c = spec.containers[0]!;
    expect(c.args).toEqual(["run", "--config", "/etc/bearer-proxy/config.yaml"]);
    expect(c.startupProbe?.httpGet).toEqual({ path: "/startup", port: "admin" });
    expect(c.livenessProbe?.httpGet).toEqual({ path: "/livez", port: "admin" });
    expect(c.readinessProbe?.httpGet).toEqual({ path: "/readyz", port: "admin" });
    expect(c.lifecycle?.preStop?.sleep?.seconds).toBe(5);
    expect(spec.terminationGracePeriodSeconds).toBe(5 + 5 + 30 + 5);
    expect(spec.automountServiceAccountToken).toBe(false);
    expect(c.securityContext).toMatchObject({
      runAsNonRoot: true,
      runAsUser: 65532,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(spec.volumes.map((v) => v.name).sort()).toEqual(["config", "credentials", "tmp"]);
    expect(parse(configMapText(objects))).not.toHaveProperty("callers");
  });

  it("follows shutdown values into the grace period and the hook", () => {
    const objects = renderObjects(
      [],
      [withSecret, "shutdown.preStopSleepSeconds=0", "shutdown.timeoutSeconds=60"],
    );
    const { spec } = podSpecOf(objects);
    expect(spec.terminationGracePeriodSeconds).toBe(0 + 5 + 60 + 5);
    expect(spec.containers[0]?.lifecycle).toBeUndefined();
    expect(parse(configMapText(objects)).shutdown).toEqual({ drainDelay: "5s", timeout: "60s" });
  });

  it("renders every optional object of the examples", () => {
    const kinds = new Set(examples.flatMap((f) => renderObjects([f]).map((o) => o.kind)));
    for (const kind of [
      "HorizontalPodAutoscaler",
      "NetworkPolicy",
      "ServiceMonitor",
      "PrometheusRule",
    ])
      expect(kinds).toContain(kind);
    const dashboard = renderObjects([examples[0]!]).find((o) =>
      o.metadata.name.endsWith("-dashboard"),
    );
    const json = (dashboard as unknown as { data: Record<string, string> }).data[
      "bearer-proxy.json"
    ]!;
    expect(JSON.parse(json).uid).toBe("bearer-proxy");
  });

  it("renders nothing in sidecar mode", () => {
    const result = runHelm(["template", "rel", CHART_DIR, "--set", "mode=sidecar"]);
    expect(result.status).toBe(0);
    expect(parseAllDocuments(result.stdout).filter((d) => d.toJS() !== null)).toEqual([]);
  });

  describe("Redis Cluster and Sentinel", () => {
    type Policy = { spec: { egress: { ports?: { port: number; protocol: string }[] }[] } };
    const redisEgressPorts = (objects: K8sObject[]): number[] => {
      const policy = objects.find((o) => o.kind === "NetworkPolicy") as unknown as Policy;
      // The Redis rule is the egress rule that is neither DNS (53) nor the upstreams (443).
      const rule = policy.spec.egress.find((r) =>
        r.ports?.every((p) => p.port !== 53 && p.port !== 443),
      );
      return (rule?.ports ?? []).map((p) => p.port);
    };

    it("renders Sentinel: the config, the sentinels' password env and their ports", () => {
      const file = join(CHART_DIR, "examples", "gateway-redis-sentinel-values.yaml");
      const objects = renderObjects([file]);
      expect(parse(configMapText(objects)).tokenCache.redis).toEqual({
        sentinel: {
          masterName: "mymaster",
          nodes: [
            "redis-node-0.redis-headless.egress.svc:26379",
            "redis-node-1.redis-headless.egress.svc:26379",
            "redis-node-2.redis-headless.egress.svc:26379",
          ],
          // biome-ignore-start lint/suspicious/noTemplateCurlyInString: ${VAR} is bearer-proxy's interpolation, written literally by the chart
          password: "${REDIS_PASSWORD}",
          sentinelPassword: "${REDIS_SENTINEL_PASSWORD}",
          // biome-ignore-end lint/suspicious/noTemplateCurlyInString: see above
        },
        keyPrefix: "bearer-proxy:egress:",
      });
      const env = (podSpecOf(objects).spec.containers[0] as unknown as { env: Values[] }).env;
      expect(env.map((e) => e.name)).toEqual(["REDIS_PASSWORD", "REDIS_SENTINEL_PASSWORD"]);
      expect(redisEgressPorts(objects)).toEqual([26379, 6379]);
    });

    it("renders Redis Cluster seeds into the config and their ports into the NetworkPolicy", () => {
      const objects = renderObjects(
        [],
        [
          withSecret,
          "redis.enabled=true",
          "redis.clusterNodes={redis://a.egress.svc:7000,redis://b.egress.svc:7001,redis://c.egress.svc:7000}",
          "networkPolicy.enabled=true",
        ],
      );
      expect(parse(configMapText(objects)).tokenCache.redis).toEqual({
        clusterNodes: [
          "redis://a.egress.svc:7000",
          "redis://b.egress.svc:7001",
          "redis://c.egress.svc:7000",
        ],
      });
      expect(redisEgressPorts(objects)).toEqual([7000, 7001]);
    });

    it.each([
      [["redis.url=redis://r:6379", "redis.clusterNodes={redis://a:7000}"], /exactly one of/],
      [["redis.sentinel.masterName=m"], /redis.sentinel.nodes/],
    ])("refuses %j", (sets, message) => {
      const all = [withSecret, "redis.enabled=true", ...sets];
      const result = runHelm(["template", "rel", CHART_DIR, ...all.flatMap((s) => ["--set", s])]);
      expect(result.status).not.toBe(0);
      expect(result.stderr).toMatch(message);
    });
  });

  it.each([
    [["mode=daemonset"], /mode/],
    [[withSecret, "config.listen.port=1"], /listen/],
    [["redis.enabled=true", withSecret], /redis/],
    [[], /set existingSecret/],
  ])("refuses %j", (sets, message) => {
    const result = runHelm(["template", "rel", CHART_DIR, ...sets.flatMap((s) => ["--set", s])]);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(message);
  });

  describe("caller authorization (issue #23)", () => {
    const exampleValues = (): Values =>
      mergeValues(defaults, parse(readFileSync(callersExample, "utf8")) as Values);
    const mountOf = (objects: K8sObject[], name: string): Values | undefined =>
      (
        podSpecOf(objects).spec.containers[0] as unknown as {
          volumeMounts: ({ name: string } & Values)[];
        }
      ).volumeMounts.find((m) => m.name === name);
    const volumeOf = (objects: K8sObject[], name: string): Values | undefined =>
      podSpecOf(objects).spec.volumes.find((v) => v.name === name);
    const bindings = (objects: K8sObject[]): K8sObject[] =>
      objects.filter((o) => o.kind === "ClusterRoleBinding");

    it("mounts the htpasswd Secret read-only at a fixed path and renders it as usersFile", () => {
      const objects = renderObjects([callersExample]);
      expect(volumeOf(objects, "callers")).toEqual({
        name: "callers",
        secret: {
          secretName: "bearer-proxy-callers",
          defaultMode: 288,
          items: [{ key: "htpasswd", path: "htpasswd" }],
        },
      });
      // The whole folder, never a subPath: the kubelet updates it and bearer-proxy re-reads it.
      expect(mountOf(objects, "callers")).toEqual({
        name: "callers",
        mountPath: "/var/run/secrets/bearer-proxy-callers",
        readOnly: true,
      });
      expect(volumeOf(objects, "cluster-ca")).toEqual({
        name: "cluster-ca",
        configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] },
      });
      expect(mountOf(objects, "cluster-ca")).toMatchObject({
        mountPath: "/var/run/secrets/bearer-proxy-cluster-ca",
        readOnly: true,
      });
      expect(volumeOf(objects, "jwks")).toBeUndefined();
    });

    it("renders callers from values and passes each upstream's allow list through", async () => {
      const objects = renderObjects([callersExample]);
      const text = configMapText(objects);
      const config = parse(text) as Values & { upstreams: Values[] };
      expect(config.callers).toEqual({
        basic: { usersFile: "/var/run/secrets/bearer-proxy-callers/htpasswd" },
        kubernetes: {
          issuer: "https://kubernetes.default.svc.cluster.local",
          audiences: ["bearer-proxy"],
          jwksUri: "https://kubernetes.default.svc/openid/v1/jwks",
          jwksTokenFile: "/var/run/secrets/bearer-proxy-api-token/token",
          caFile: "/var/run/secrets/bearer-proxy-cluster-ca/ca.crt",
        },
      });
      expect(config.upstreams.map((u) => [u.name, u.allow])).toEqual([
        ["billing", [{ serviceAccount: "payments/billing-client" }, { user: "reporting-cron" }]],
        ["reports", [{ cidr: "10.12.0.0/16" }, { namespace: "reporting" }]],
      ]);
      // The whole config as the tests model it.
      const values = exampleValues();
      expect(config).toEqual({ ...renderChartConfig(values), callers: renderChartCallers(values) });
      const problems = await validateWithLoader(text);
      expect(problems.filter((p) => !ABSENT_CALLER_FILE.test(p))).toEqual([]);
      // A changed callers section or allow list rolls the pods like any config change.
      expect(podSpecOf(objects).annotations["checksum/config"]).toBe(
        createHash("sha256").update(text.replace(/\n$/, "")).digest("hex"),
      );
    });

    it("renders the password check limits when set, and leaves them to the proxy's defaults when not", () => {
      const sets = ["callers.basic.maxConcurrentChecks=1", "callers.basic.maxQueuedChecks=50"];
      const config = parse(configMapText(renderObjects([callersExample], sets))) as Values;
      expect((config.callers as Values).basic).toEqual({
        usersFile: "/var/run/secrets/bearer-proxy-callers/htpasswd",
        maxConcurrentChecks: 1,
        maxQueuedChecks: 50,
      });
      const values = exampleValues();
      const basic = (values.callers as { basic: Values }).basic;
      basic.maxConcurrentChecks = 1;
      basic.maxQueuedChecks = 50;
      expect(config.callers).toEqual(renderChartCallers(values));
      const refused = runHelm([
        "template",
        "rel",
        CHART_DIR,
        "-f",
        callersExample,
        "--set",
        "callers.basic.maxConcurrentChecks=0",
      ]);
      expect(refused.status).not.toBe(0);
      expect(refused.stderr).toMatch(/maxConcurrentChecks/);
    });

    it("mounts a JWKS ConfigMap as jwksFile instead of fetching jwksUri", () => {
      const objects = renderObjects(
        [callersExample],
        [
          "callers.kubernetes.jwksUri=",
          "callers.kubernetes.clusterCA=false",
          "callers.kubernetes.jwksConfigMap.name=cluster-jwks",
        ],
      );
      expect(volumeOf(objects, "jwks")).toEqual({
        name: "jwks",
        configMap: { name: "cluster-jwks", items: [{ key: "jwks.json", path: "jwks.json" }] },
      });
      expect(mountOf(objects, "jwks")).toMatchObject({
        mountPath: "/etc/bearer-proxy-jwks",
        readOnly: true,
      });
      expect(volumeOf(objects, "cluster-ca")).toBeUndefined();
      expect(volumeOf(objects, "api-token")).toBeUndefined();
      const expected = {
        issuer: "https://kubernetes.default.svc.cluster.local",
        audiences: ["bearer-proxy"],
        jwksFile: "/etc/bearer-proxy-jwks/jwks.json",
      };
      expect(parse(configMapText(objects)).callers.kubernetes).toEqual(expected);
      const values = mergeValues(exampleValues(), {
        callers: { kubernetes: { jwksUri: "", clusterCA: false, jwksConfigMap: { name: "x" } } },
      });
      expect((renderChartCallers(values) as Values).kubernetes).toEqual(expected);
    });

    it("binds system:service-account-issuer-discovery to the chart's ServiceAccount only when asked", () => {
      expect(bindings(renderObjects([callersExample]))).toEqual([]);
      expect(bindings(renderObjects([], [withSecret]))).toEqual([]);
      const objects = renderObjects([callersExample], ["rbac.issuerDiscovery=true"]);
      const account = objects.find((o) => o.kind === "ServiceAccount")!;
      expect(bindings(objects)).toEqual([
        expect.objectContaining({
          apiVersion: "rbac.authorization.k8s.io/v1",
          metadata: expect.objectContaining({ name: "egress-bearer-proxy-issuer-discovery" }),
          roleRef: {
            apiGroup: "rbac.authorization.k8s.io",
            kind: "ClusterRole",
            name: "system:service-account-issuer-discovery",
          },
          subjects: [{ kind: "ServiceAccount", name: account.metadata.name, namespace: "egress" }],
        }),
      ]);
    });

    describe("the API server's JWKS: the fetch presents the pod's own service-account token", () => {
      const kubernetesOf = (objects: K8sObject[]): Values =>
        parse(configMapText(objects)).callers.kubernetes as Values;
      const accountOf = (objects: K8sObject[]) =>
        objects.find((o) => o.kind === "ServiceAccount") as K8sObject & {
          automountServiceAccountToken: boolean;
        };

      it("mounts a projected token with the API server's audience and sets jwksTokenFile to it", async () => {
        const objects = renderObjects([callersExample]);
        expect(volumeOf(objects, "api-token")).toEqual({
          name: "api-token",
          projected: {
            defaultMode: 292,
            // No audience: the API server's own, which is what /openid/v1/jwks authenticates.
            sources: [{ serviceAccountToken: { path: "token", expirationSeconds: 3600 } }],
          },
        });
        expect(mountOf(objects, "api-token")).toEqual({
          name: "api-token",
          mountPath: "/var/run/secrets/bearer-proxy-api-token",
          readOnly: true,
        });
        expect(kubernetesOf(objects).jwksTokenFile).toBe(CHART_CALLER_FILES.apiTokenFile);
        // Nothing else of the API credentials: no automount, so no ca.crt and no namespace file.
        expect(podSpecOf(objects).spec.automountServiceAccountToken).toBe(false);
        expect(accountOf(objects).automountServiceAccountToken).toBe(false);
        // bearer-proxy accepts it (the token, like the other mounted files, exists only in the pod).
        expect(await validateWithLoader(configMapText(objects))).toEqual([]);
      });

      it("uses the automounted token instead when serviceAccount.automountServiceAccountToken is on", () => {
        const objects = renderObjects(
          [callersExample],
          ["serviceAccount.automountServiceAccountToken=true"],
        );
        expect(volumeOf(objects, "api-token")).toBeUndefined();
        expect(mountOf(objects, "api-token")).toBeUndefined();
        expect(podSpecOf(objects).spec.automountServiceAccountToken).toBe(true);
        expect(accountOf(objects).automountServiceAccountToken).toBe(true);
        expect(kubernetesOf(objects).jwksTokenFile).toBe(
          "/var/run/secrets/kubernetes.io/serviceaccount/token",
        );
      });

      it.each([
        ["https://kubernetes.default.svc.cluster.local/openid/v1/jwks", true],
        ["https://kubernetes.default.svc:443/openid/v1/jwks", true],
        ["https://kubernetes.default/openid/v1/jwks", true],
        ["https://kubernetes/openid/v1/jwks", true],
        ["https://kubernetes.example.com/openid/v1/jwks", false],
        ["https://kubernetes-oidc.example.com/keys", false],
        ["https://oidc.eks.eu-west-1.amazonaws.com/id/ABC/keys", false],
      ])("jwksUri %s: the pod's token is sent: %s", (uri, sent) => {
        const sets = [`callers.kubernetes.jwksUri=${uri}`, "callers.kubernetes.clusterCA=false"];
        const objects = renderObjects([callersExample], sets);
        const expected = sent ? CHART_CALLER_FILES.apiTokenFile : undefined;
        expect(kubernetesOf(objects).jwksTokenFile).toBe(expected);
        expect(volumeOf(objects, "api-token") !== undefined).toBe(sent);
        const values = mergeValues(exampleValues(), {
          callers: { kubernetes: { jwksUri: uri, clusterCA: false } },
        });
        expect(chartJwksTokenFile(values)).toBe(expected);
      });

      it("rbac.issuerDiscovery says the jwksUri is the API server's, whatever its host", () => {
        const sets = [
          "callers.kubernetes.jwksUri=https://10.0.0.1:6443/openid/v1/jwks",
          "rbac.issuerDiscovery=true",
        ];
        const objects = renderObjects([callersExample], sets);
        expect(kubernetesOf(objects).jwksTokenFile).toBe(CHART_CALLER_FILES.apiTokenFile);
        expect(volumeOf(objects, "api-token")).toBeDefined();
        expect(bindings(objects)).toHaveLength(1);
      });

      it("a jwksTokenFile of your own is passed as is, and the chart mounts no token", () => {
        const objects = renderObjects(
          [callersExample],
          ["callers.kubernetes.jwksTokenFile=/var/run/secrets/jwks-reader/token"],
        );
        expect(kubernetesOf(objects).jwksTokenFile).toBe("/var/run/secrets/jwks-reader/token");
        expect(volumeOf(objects, "api-token")).toBeUndefined();
      });

      it("a JWKS file needs no token", () => {
        const objects = renderObjects(
          [callersExample],
          [
            "callers.kubernetes.jwksUri=",
            "callers.kubernetes.clusterCA=false",
            "callers.kubernetes.jwksFile=/etc/jwks/jwks.json",
          ],
        );
        expect(kubernetesOf(objects)).not.toHaveProperty("jwksTokenFile");
        expect(volumeOf(objects, "api-token")).toBeUndefined();
      });
    });

    const upstream = {
      name: "api",
      baseUrl: "https://api.example.com",
      clientSecretFile: "/var/run/secrets/bearer-proxy/client-secret",
    };
    const noServiceAccounts = [
      "callers.kubernetes.issuer=",
      "callers.kubernetes.jwksUri=",
      "callers.kubernetes.clusterCA=false",
    ];
    it.each([
      [
        "an allow entry with an unknown key",
        [],
        { allow: [{ group: "payments" }] },
        /allow\/0.*additional properties 'group' not allowed/,
      ],
      [
        "an allow entry with two keys",
        [],
        { allow: [{ cidr: "10.0.0.0/8", user: "a" }] },
        /allow\/0.*maxProperties/,
      ],
      [
        "a serviceAccount that is not namespace/name",
        [],
        { allow: [{ serviceAccount: "billing-client" }] },
        /allow\/0\/serviceAccount/,
      ],
      [
        "a user rule without callers.basic",
        ["callers.basic.existingSecret="],
        undefined,
        /allows user "reporting-cron": set callers.basic.existingSecret/,
      ],
      [
        "service-account rules without callers.kubernetes",
        noServiceAccounts,
        undefined,
        /allows service accounts: set callers.kubernetes.issuer/,
      ],
      [
        "two JWKS sources",
        ["callers.kubernetes.jwksConfigMap.name=cluster-jwks"],
        undefined,
        /exactly one of callers.kubernetes.jwksUri.*found 2/,
      ],
      [
        "an http:// jwksUri",
        ["callers.kubernetes.jwksUri=http://kubernetes.default.svc/openid/v1/jwks"],
        undefined,
        /jwksUri.*does not match pattern/,
      ],
      [
        "jwksTokenFile without jwksUri",
        [
          "callers.kubernetes.jwksUri=",
          "callers.kubernetes.clusterCA=false",
          "callers.kubernetes.jwksConfigMap.name=cluster-jwks",
          "callers.kubernetes.jwksTokenFile=/var/run/secrets/jwks-reader/token",
        ],
        undefined,
        /jwksTokenFile authenticates the fetch of jwksUri: set callers.kubernetes.jwksUri/,
      ],
      [
        "a relative jwksTokenFile",
        ["callers.kubernetes.jwksTokenFile=token"],
        undefined,
        /jwksTokenFile.*does not match pattern/,
      ],
      [
        "clusterCA and caFile together",
        ["callers.kubernetes.caFile=/etc/ca.pem"],
        undefined,
        /clusterCA or caFile, not both/,
      ],
      [
        "rbac.issuerDiscovery without a jwksUri",
        [...noServiceAccounts, "callers.basic.existingSecret=", "rbac.issuerDiscovery=true"],
        { allow: [{ cidr: "10.0.0.0/8" }] },
        /rbac.issuerDiscovery is for callers.kubernetes.jwksUri/,
      ],
      [
        "config.callers (the chart renders it)",
        ["config.callers.basic.usersFile=/etc/htpasswd"],
        undefined,
        // values.schema.json refuses it first; the template's own check stays for --skip-schema-validation.
        /config.callers is rendered by the chart|additional properties 'callers' not allowed/,
      ],
    ])("refuses %s", (_name, sets, upstreamOverride, message) => {
      const args = ["template", "rel", CHART_DIR, "-f", callersExample];
      for (const set of sets) args.push("--set", set);
      if (upstreamOverride)
        args.push(
          "--set-json",
          `config.upstreams=${JSON.stringify([{ ...upstream, ...upstreamOverride }])}`,
        );
      const result = runHelm(args);
      expect(result.status).not.toBe(0);
      expect(result.stderr).toMatch(message);
    });
  });

  describe("bearer-proxy.sidecar from a parent chart", () => {
    const dir = mkdtempSync(join(tmpdir(), "bp-parent-"));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it("renders the same container and volumes as examples/sidecar-native.yaml", () => {
      mkdirSync(join(dir, "charts"), { recursive: true });
      mkdirSync(join(dir, "templates"));
      cpSync(CHART_DIR, join(dir, "charts", "bearer-proxy"), { recursive: true });
      writeFileSync(
        join(dir, "Chart.yaml"),
        "apiVersion: v2\nname: app\nversion: 0.1.0\ndependencies:\n  - name: bearer-proxy\n    version: 0.1.0\n",
      );
      writeFileSync(join(dir, "values.yaml"), "bearer-proxy:\n  mode: sidecar\n");
      writeFileSync(
        join(dir, "templates", "pod.yaml"),
        [
          "apiVersion: v1",
          "kind: Pod",
          "metadata:",
          "  name: app",
          "spec:",
          "  initContainers:",
          '    {{- include "bearer-proxy.sidecar" (dict "baseUrl" "https://api.example.com" "secretName" "api-credentials") | nindent 4 }}',
          "  containers: []",
          "  volumes:",
          '    {{- include "bearer-proxy.sidecarVolumes" (dict "secretName" "api-credentials") | nindent 4 }}',
          "",
        ].join("\n"),
      );
      const result = runHelm(["template", "p", dir]);
      expect(result.stderr).toBe("");
      const pod = parse(result.stdout) as { spec: PodSpec };
      const example = parseAllDocuments(
        readFileSync(join(CHART_DIR, "examples", "sidecar-native.yaml"), "utf8"),
      )[0]!.toJS() as { spec: { template: { spec: PodSpec } } };
      const expected = example.spec.template.spec;
      expect(pod.spec.initContainers).toEqual(expected.initContainers);
      expect(pod.spec.volumes).toEqual(expected.volumes);
    });
  });
});
