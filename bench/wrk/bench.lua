-- wrk script for the bench: method and body size come from the environment; at the end it
-- prints one machine-readable line (BENCH_RESULT {...}) with exact counts and percentiles.
local method = os.getenv("BENCH_METHOD") or "GET"
local body_bytes = tonumber(os.getenv("BENCH_BODY_BYTES") or "0")

wrk.method = method
if body_bytes > 0 then
  wrk.body = string.rep("x", body_bytes)
  wrk.headers["Content-Type"] = "application/octet-stream"
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests":%d,"durationUs":%d,"bytes":%d,' ..
    '"connectErrors":%d,"readErrors":%d,"writeErrors":%d,"statusErrors":%d,"timeouts":%d,' ..
    '"p50Us":%d,"p90Us":%d,"p99Us":%d,"maxUs":%d,"meanUs":%.1f}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean))
end
