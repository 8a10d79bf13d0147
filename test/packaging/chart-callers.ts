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
} as const;

/**
 * Loader messages about a callers file that does not exist on this machine: the htpasswd file,
 * the CA and the JWKS the chart mounts exist only in the pod.
 */
export const ABSENT_CALLER_FILE = /expected a readable (htpasswd|CA|JWKS) file, found no such file/;

interface CallersValues {
  basic: { existingSecret: string; key: string };
  kubernetes: {
    issuer: string;
    audiences: string[];
    jwksUri: string;
    caFile: string;
    clusterCA: boolean;
    jwksFile: string;
    jwksConfigMap: { name: string; key: string };
  };
}

/**
 * The config's `callers` as the chart renders it (kept in step with the template by hand), or
 * undefined when neither Basic users nor service-account tokens are configured.
 */
export function renderChartCallers(values: Values): Values | undefined {
  const { basic, kubernetes: k } = values.callers as CallersValues;
  const callers: Values = {};
  if (basic.existingSecret) callers.basic = { usersFile: CHART_CALLER_FILES.usersFile };
  if (k.issuer) {
    const kube: Values = { issuer: k.issuer, audiences: k.audiences };
    if (k.jwksUri) kube.jwksUri = k.jwksUri;
    if (k.clusterCA) kube.caFile = CHART_CALLER_FILES.clusterCAFile;
    else if (k.caFile) kube.caFile = k.caFile;
    if (k.jwksConfigMap.name) kube.jwksFile = CHART_CALLER_FILES.jwksConfigMapFile;
    else if (k.jwksFile) kube.jwksFile = k.jwksFile;
    callers.kubernetes = kube;
  }
  return Object.keys(callers).length > 0 ? callers : undefined;
}
