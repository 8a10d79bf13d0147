/**
 * A URL as logs and status pages may show it: scheme, host and path. Userinfo, query and
 * fragment are where credentials and API keys hide in URLs, so they are dropped.
 */
export function loggableUrl(url: string | URL): string {
  const parsed = typeof url === "string" ? new URL(url) : url;
  return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
}
