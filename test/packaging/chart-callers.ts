/**
 * The chart's view of caller authorization, for the packaging tests: the config's `callers`
 * section as templates/_config.tpl (`bearer-proxy.callers`) renders it from `callers.*`, and
 * which loader messages are about the files the chart mounts (present only in the pod).
 */
import type { Values } from "./schema-tools.js";

/** Where the chart mounts the files of `callers.*` (templates/_helpers.tpl). */
export const CHART_CALLER_FILES = {
  usersFile: "/var/run/secrets/bearer-proxy-callers/htpasswd",
  jwksConfigMapFile: "/etc/bearer-proxy-jwks/jwks.json",
  clusterCAFile: "/var/run/secrets/bearer-proxy-cluster-ca/ca.crt",
  /** The chart's projected API token, for the API server's JWKS. */
  apiTokenFile: "/var/run/secrets/bearer-proxy-api-token/token",
  /** The automounted API token (serviceAccount.automountServiceAccountToken). */
  automountedTokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token",
} as const;

/** The API server's in-cluster names, as bearer-proxy.jwksFromApiServer matches a jwksUri. */
const API_SERVER_URI = /^https:\/\/kubernetes(\.default(\.svc(\.[^/:?#]+)?)?)?(:[0-9]+)?([/?#]|$)/;

/**
 * Loader messages about a callers file that does not exist on this machine: the htpasswd file,
 * the CA and the JWKS the chart mounts exist only in the pod.
 */
export const ABSENT_CALLER_FILE =
  /expected a readable (htpasswd|CA|JWKS|token) file, found no such file/;

interface CallersValues {
  basic: {
    existingSecret: string;
    key: string;
    maxConcurrentChecks: number | null;
    maxQueuedChecks: number | null;
  };
  kubernetes: {
    issuer: string;
    audiences: string[];
    jwksUri: string;
    caFile: string;
    clusterCA: boolean;
    jwksFile: string;
    jwksTokenFile: string;
    jwksConfigMap: { name: string; key: string };
  };
}

/**
 * The config's `jwksTokenFile`: the value when set; for the API server's JWKS (its host, or
 * rbac.issuerDiscovery) the pod's token, automounted or the chart's projected one; else none.
 */
export function chartJwksTokenFile(values: Values): string | undefined {
  const { kubernetes: k } = values.callers as CallersValues;
  if (k.jwksTokenFile) return k.jwksTokenFile;
  const issuerDiscovery = (values.rbac as { issuerDiscovery: boolean }).issuerDiscovery;
  if (!k.issuer || !k.jwksUri || !(issuerDiscovery || API_SERVER_URI.test(k.jwksUri))) {
    return undefined;
  }
  const automount = (values.serviceAccount as { automountServiceAccountToken: boolean })
    .automountServiceAccountToken;
  return automount ? CHART_CALLER_FILES.automountedTokenFile : CHART_CALLER_FILES.apiTokenFile;
}

/**
 * The config's `callers` as the chart renders it (kept in step with the template by hand), or
 * undefined when neither Basic users nor service-account tokens are configured.
 */
export function renderChartCallers(values: Values): Values | undefined {
  const { basic, kubernetes: k } = values.callers as CallersValues;
  const callers: Values = {};
  if (basic.existingSecret) {
    callers.basic = {
      usersFile: CHART_CALLER_FILES.usersFile,
      ...(basic.maxConcurrentChecks === null
        ? {}
        : { maxConcurrentChecks: basic.maxConcurrentChecks }),
      ...(basic.maxQueuedChecks === null ? {} : { maxQueuedChecks: basic.maxQueuedChecks }),
    };
  }
  if (k.issuer) {
    const kube: Values = { issuer: k.issuer, audiences: k.audiences };
    if (k.jwksUri) kube.jwksUri = k.jwksUri;
    const tokenFile = chartJwksTokenFile(values);
    if (tokenFile) kube.jwksTokenFile = tokenFile;
    if (k.clusterCA) kube.caFile = CHART_CALLER_FILES.clusterCAFile;
    else if (k.caFile) kube.caFile = k.caFile;
    if (k.jwksConfigMap.name) kube.jwksFile = CHART_CALLER_FILES.jwksConfigMapFile;
    else if (k.jwksFile) kube.jwksFile = k.jwksFile;
    callers.kubernetes = kube;
  }
  return Object.keys(callers).length > 0 ? callers : undefined;
}
