import{createRequire as __cr}from'node:module';const require=__cr(import.meta.url);
import{readFileSync as o}from"node:fs";function n(){for(let e of["../package.json","../../package.json"])try{let r=JSON.parse(o(new URL(e,import.meta.url),"utf8"));if(r.name==="bearer-proxy"&&r.version)return r.version}catch{}return"0.0.0"}var a=n();export{a};
