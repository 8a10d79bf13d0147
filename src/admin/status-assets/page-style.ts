/** The status page's stylesheet, served as a same-origin file (the CSP allows no inline style). */
export const STATUS_PAGE_STYLE = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;background:#f6f8fa;color:#1f2328}
header{background:#24292f;color:#fff;padding:10px 24px;display:flex;gap:16px;align-items:center;flex-wrap:wrap}
header h1{font-size:18px;margin:0 8px 0 0}
header .meta{color:#d0d7de}
header b{color:#fff}
form#filters{display:flex;gap:12px;align-items:center;flex-wrap:wrap;padding:10px 24px;background:#fff;border-bottom:1px solid #d0d7de;position:sticky;top:0;z-index:1}
form#filters label{color:#57606a;display:flex;gap:6px;align-items:center}
form#filters input[type=search]{width:260px;padding:4px 8px;border:1px solid #d0d7de;border-radius:6px;font:inherit}
form#filters select,form#filters button{padding:4px 8px;border:1px solid #d0d7de;border-radius:6px;background:#f6f8fa;font:inherit}
#live{padding:12px 24px}
section{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:12px 16px;margin-bottom:12px}
h2{font-size:16px;margin:0 0 8px;display:flex;gap:8px;align-items:center}
h3{font-size:13px;margin:12px 0 4px;color:#57606a;text-transform:uppercase;letter-spacing:.04em}
.stats{display:flex;gap:28px;flex-wrap:wrap;margin-bottom:8px}
.stat{display:flex;flex-direction:column}
.stat .label{color:#57606a;font-size:12px}
.stat b{font-size:22px}
.states{margin:6px 0 10px}
.states .count{margin-right:10px;text-decoration:none;color:inherit;white-space:nowrap}
.overview{display:grid;grid-template-columns:minmax(0,660px) minmax(0,1fr);gap:16px}
figure{margin:0}
figcaption{color:#57606a;font-size:12px}
ol.problems{margin:0;padding-left:20px}
ol.problems li{margin:2px 0;overflow-wrap:anywhere}
.columns{display:grid;grid-template-columns:minmax(0,1fr);gap:12px}
.columns.with-detail{grid-template-columns:minmax(0,1fr) minmax(0,560px)}
svg.chart,svg.timeline{max-width:100%;height:auto}
table{border-collapse:collapse;width:100%}
.list th{text-align:left;color:#57606a;font-weight:600;border-bottom:1px solid #d0d7de;padding:4px 8px 4px 0}
.list td{padding:3px 8px 3px 0;border-bottom:1px solid #eaeef2;vertical-align:top}
.list td.url,.list td.last-error{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px;overflow-wrap:anywhere}
.list tr.selected{background:#ddf4ff}
.num{text-align:right}
.pager{display:flex;gap:16px;margin-top:8px}
.facts th{text-align:left;font-weight:600;color:#57606a;padding:3px 12px 3px 0;width:34%;vertical-align:top}
.facts td{padding:3px 0;overflow-wrap:anywhere;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:13px}
.close{margin-left:auto;text-decoration:none;font-size:20px;color:#57606a}
.sparks{display:flex;gap:16px;flex-wrap:wrap}
.sparks .label{display:block;color:#57606a;font-size:12px}
.badge{display:inline-block;border-radius:10px;padding:1px 9px;color:#fff;font-size:12px;font-weight:600;background:#57606a}
.b-valid,.b-running,.b-ready,.b-up,.b-loaded{background:#1a7f37}
.b-degraded,.b-draining,.b-stale{background:#9a6700}
.b-fetching,.b-starting,.b-connecting{background:#0969da}
.b-failed,.b-not-ready,.b-down{background:#cf222e}
.b-idle,.b-closed,.b-stopped{background:#57606a}
.error{color:#cf222e}
.muted{color:#57606a}
.empty{padding:12px 0;color:#57606a}
footer{padding:0 24px 16px;color:#57606a;font-size:12px}
svg text{font:11px system-ui,sans-serif;fill:#57606a}
svg .axis{stroke:#8c959f}
svg .grid{stroke:#d0d7de;stroke-dasharray:3 3}
.chart .requests-area{fill:#ddf4ff}
.chart .requests-line{fill:none;stroke:#0969da;stroke-width:1.5}
.chart .errors-line{fill:none;stroke:#cf222e;stroke-width:1.5}
.spark polyline{fill:none;stroke-width:1.5}
.spark.requests polyline{stroke:#0969da}
.spark.errors polyline{stroke:#cf222e}
.timeline .life{fill:#aceebb}
.timeline .window{fill:#d4a72c}
.timeline .next{stroke:#9a6700;stroke-width:2}
.timeline .now{stroke:#1f2328;stroke-width:2}
.timeline .now-label{fill:#1f2328;font-weight:600}
.list td.last-error{min-width:12em}
.list td.route,.list td.allow{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px;overflow-wrap:break-word}
.columns.with-detail .list .wide{display:none}
.refused{color:#57606a;font-weight:600}
.notice{margin:12px 24px 0}
.refusal-list{margin-top:12px}
.refusal-codes{margin:4px 0;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
table.refusals{font-size:12px;margin-top:4px}
table.refusals th{text-align:left;color:#57606a;font-weight:600;border-bottom:1px solid #d0d7de;padding:2px 8px 2px 0}
table.refusals td{padding:2px 8px 2px 0;border-bottom:1px solid #eaeef2;overflow-wrap:anywhere}
.rule{display:inline-block;border:1px solid #d0d7de;border-radius:6px;padding:0 6px;margin:0 4px 2px 0;background:#f6f8fa}
@media (max-width:1300px){.columns.with-detail,.overview{grid-template-columns:minmax(0,1fr)}}
`;
