import{createRequire as __cr}from'node:module';const require=__cr(import.meta.url);
import{a as s,d as a,e,f as m}from"./chunk-POMJOO5W.js";import{c as i}from"./chunk-G76AJUXF.js";import"./chunk-4OFWU4TT.js";import"./chunk-FE26X6BP.js";import"./chunk-NVNJMJNU.js";async function l(n){let t=m(n);try{let{config:r,warnings:f}=await a({configFile:t,flags:e(n)});for(let o of f)process.stderr.write(`warning: ${o}
`);let c=r.upstreams.map(o=>o.name).join(", ");return process.stdout.write(`${t??"configuration"} is valid: ${r.upstreams.length} upstream(s) (${c}), proxy on ${r.listen.host}:${r.listen.port}, admin on ${r.admin.host}:${r.admin.port}
`),0}catch(r){if(r instanceof i)return process.stderr.write(`${s(r)}
`),1;throw r}}export{l as validateCommand};
