import{createRequire as __cr}from'node:module';const require=__cr(import.meta.url);
import{a as p,b as u,c as d}from"./chunk-TU67DRKS.js";import"./chunk-KAQL3AAX.js";import"./chunk-2LVHD3MR.js";import"./chunk-PDMIB3LD.js";import"./chunk-442RJ5NQ.js";import{a as f}from"./chunk-SVRDHVEU.js";import{c as m}from"./chunk-POMJOO5W.js";import"./chunk-G76AJUXF.js";import"./chunk-4OFWU4TT.js";import"./chunk-FE26X6BP.js";import"./chunk-NVNJMJNU.js";function c(t,o,e){let r=t[o];if(typeof r!="string")return e;if(!/^[0-9]+$/.test(r)||Number(r)>65535)throw new Error(`--${o}: expected a port number, found "${r}"`);return Number(r)}function $(t){return`
listen: { host: 127.0.0.1, port: ${t.port} }
admin: { host: 127.0.0.1, port: ${t.adminPort} }
log: { level: info, format: ${t.logFormat} }
shutdown: { drainDelay: 0s, timeout: 5s }
upstreams:
  - name: sheets
    baseUrl: ${t.emulatorUrl}
    apiVersion: default
    clientId: demo-client
    clientSecret: demo-secret
    tls: { caFile: ${JSON.stringify(t.caFile)} }
    match: { pathPrefix: / }
  - name: scripts
    baseUrl: ${t.emulatorUrl}
    apiVersion: scripting-preview
    tokenRequestFormat: json
    clientId: demo-client
    clientSecret: demo-secret
    tls: { caFile: ${JSON.stringify(t.caFile)} }
    match: { pathPrefix: /scripts }
`}async function b(t){let o=c(t,"port",8080),e=c(t,"admin-port",9901),r=c(t,"emulator-port",8443),s=typeof t["log-format"]=="string"?t["log-format"]:process.stdout.isTTY?"pretty":"json",n=await f({port:r}),{config:g,logger:h,running:i}=await w(n,{port:o,adminPort:e,logFormat:s}).catch(async y=>{throw await n.close().catch(()=>{}),y});d(g,h,i.addresses);let a=i.addresses.proxy[0]?.port??o,l=i.addresses.admin.port;return process.stdout.write(["","bearer-proxy demo is running: the built-in upstream emulator plus a proxy pointed at it.",`  emulator (HTTPS, the "upstream"): ${n.url}   CA: ${n.caFile}`,`  proxy (plain HTTP, no credentials needed): http://127.0.0.1:${a}`,"","Try:",`  curl http://127.0.0.1:${a}/platform/v1/spreadsheets/demo     # default version: Authorization injected`,`  curl http://127.0.0.1:${a}/scripts                           # preview: Authorization + X-Version injected`,`  curl http://127.0.0.1:${a}/echo/anything                     # what the upstream received`,`  curl http://127.0.0.1:${l}/status                            # token state (fingerprints only)`,`  curl http://127.0.0.1:${l}/metrics`,"","Stop with Ctrl-C.",""].join(`
`)),i.done}async function w(t,o){let e=await m({configText:$({emulatorUrl:t.url,caFile:t.caFile,...o}),env:{}}),r=u({level:e.log.level,format:e.log.format}),s=await p(e,{logger:r,handleSignals:!0,onStopped:()=>t.close()});return{config:e,logger:r,running:s}}export{b as demoCommand,$ as demoConfigYaml};
