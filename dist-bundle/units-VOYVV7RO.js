import{createRequire as __cr}from'node:module';const require=__cr(import.meta.url);
import{a,b,c,d}from"./chunk-4OFWU4TT.js";import"./chunk-NVNJMJNU.js";export{b as DURATION_PATTERN,a as MAX_DURATION_MS,d as parseByteSize,c as parseDurationMs};
