import{createRequire as __cr}from'node:module';const require=__cr(import.meta.url);
import{a,b,c,d}from"./chunk-ULYNG5EL.js";import"./chunk-2LVHD3MR.js";import"./chunk-PDMIB3LD.js";import"./chunk-G76AJUXF.js";import"./chunk-4OFWU4TT.js";import"./chunk-NVNJMJNU.js";export{c as fetchToken,a as runToken,d as safeMessage,b as selectUpstreams};
