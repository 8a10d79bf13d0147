/**
 * A small scanner for Go templates (Helm's), enough to review templates without a `helm`
 * binary: it finds every `{{ … }}` action (skipping string literals, so `{{`{{ $x }}`}}` counts
 * once), and checks that block actions open and close in pairs.
 */

/** One `{{ … }}` action: its body without delimiters and trim markers, and where it starts. */
export interface TemplateAction {
  body: string;
  line: number;
}

/** What scanning one template found. */
export interface TemplateScan {
  actions: TemplateAction[];
  /** Unbalanced delimiters or blocks, each with a line number. */
  problems: string[];
}

const BLOCK_OPENERS = new Set(["if", "range", "with", "define", "block"]);

function lineAt(source: string, index: number): number {
  let line = 1;
  for (let i = 0; i < index; i++) if (source.charCodeAt(i) === 10) line++;
  return line;
}

/** Index just past the literal that starts at `i` (a `"…"`, `` `…` `` or `'…'`), or -1. */
function skipLiteral(source: string, i: number): number {
  const quote = source[i];
  if (quote === "`") {
    const end = source.indexOf("`", i + 1);
    return end === -1 ? -1 : end + 1;
  }
  for (let j = i + 1; j < source.length; j++) {
    if (source[j] === "\\") j++;
    else if (source[j] === quote) return j + 1;
    else if (source[j] === "\n") return -1;
  }
  return -1;
}

/** Finds the actions of a template and the problems with its delimiters and blocks. */
export function scanTemplate(source: string): TemplateScan {
  const actions: TemplateAction[] = [];
  const problems: string[] = [];
  let i = 0;
  for (;;) {
    const open = source.indexOf("{{", i);
    const text = source.slice(i, open === -1 ? source.length : open);
    const stray = text.indexOf("}}");
    if (stray !== -1) problems.push(`line ${lineAt(source, i + stray)}: "}}" without "{{"`);
    if (open === -1) break;
    const line = lineAt(source, open);
    let j = open + 2;
    let body: string | undefined;
    const afterTrim = source.slice(j).replace(/^- /, "  ");
    if (/^\s*\/\*/.test(afterTrim)) {
      const close = source.indexOf("*/", j);
      const end = close === -1 ? -1 : source.slice(close + 2).search(/^\s*-?}}/);
      if (close === -1 || end === -1) {
        problems.push(`line ${line}: unterminated comment`);
        break;
      }
      i = source.indexOf("}}", close + 2) + 2;
      continue;
    }
    while (j < source.length) {
      if (source.startsWith("}}", j)) {
        body = source.slice(open + 2, j);
        break;
      }
      const c = source[j];
      if (c === '"' || c === "`" || c === "'") {
        const next = skipLiteral(source, j);
        if (next === -1) break;
        j = next;
      } else j++;
    }
    if (body === undefined) {
      problems.push(`line ${line}: "{{" without "}}"`);
      break;
    }
    actions.push({ body: body.replace(/^-\s/, "").replace(/\s-$/, "").trim(), line });
    i = j + 2;
  }

  // `with` and `range` rebind the dot, so `.Values` inside them is a bug (`$.Values` is meant);
  // a `define` starts afresh with its argument as the dot.
  const stack: { action: TemplateAction; keyword: string; rebinds: boolean }[] = [];
  const dotRebound = (): boolean => {
    for (let k = stack.length - 1; k >= 0; k--) {
      if (stack[k]!.keyword === "define") return false;
      if (stack[k]!.rebinds) return true;
    }
    return false;
  };
  for (const action of actions) {
    const [keyword = "", second = ""] = action.body.split(/\s+/);
    if (dotRebound() && /(?:^|[^$\w])\.Values\b/.test(stripLiterals(action.body)))
      problems.push(
        `line ${action.line}: .Values inside with/range refers to the new dot; use $.Values`,
      );
    if (BLOCK_OPENERS.has(keyword))
      stack.push({ action, keyword, rebinds: keyword === "with" || keyword === "range" });
    else if (keyword === "else") {
      const top = stack[stack.length - 1];
      if (top === undefined) problems.push(`line ${action.line}: "else" outside a block`);
      else top.rebinds = second === "with";
    } else if (keyword === "end" && stack.pop() === undefined)
      problems.push(`line ${action.line}: "end" without an open block`);
  }
  for (const open of stack)
    problems.push(`line ${open.action.line}: "${open.action.body}" is never closed`);
  return { actions, problems };
}

/** Names in `include "x"` and `template "x"` calls. */
export function referencedTemplates(actions: readonly TemplateAction[]): string[] {
  return actions.flatMap((a) =>
    [...a.body.matchAll(/\b(?:include|template)\s+"([^"]+)"/g)].map((m) => m[1]!),
  );
}

/** Names in `define "x"` actions. */
export function definedTemplates(actions: readonly TemplateAction[]): string[] {
  return actions.flatMap((a) => {
    const m = /^define\s+"([^"]+)"/.exec(a.body);
    return m ? [m[1]!] : [];
  });
}

/** An action's code with its string literals emptied. */
function stripLiterals(body: string): string {
  return body.replace(/"(?:[^"\\]|\\.)*"|`[^`]*`/g, '""');
}

/** `.Values.a.b` paths (as `a.b`) used by actions, string literals left out. */
export function referencedValuePaths(actions: readonly TemplateAction[]): string[] {
  return actions.flatMap((a) => {
    const code = stripLiterals(a.body);
    return [...code.matchAll(/(?:^|[\s($])\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)/g)].map((m) =>
      m[1]!.slice(1),
    );
  });
}
