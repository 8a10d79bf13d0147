/** YAML syntax errors carry line and column; YAML features we allow. */
import { describe, expect, it } from "vitest";
import { loadConfig, loadConfigWithWarnings } from "../../src/config/load.js";
import { issuesOfText, yaml } from "./load-helpers.js";

describe("YAML syntax", () => {
  it("reports a syntax error with its line and column", async () => {
    expect(await issuesOfText("listen:\n  port: 8080\n host: x\nupstreams: []\n")).toEqual([
      { path: "line 3, column 1", message: "All mapping items must start at the same column" },
    ]);
    expect(await issuesOfText("listen:\n  port: 8080: 3\n")).toEqual([
      { path: "line 2, column 9", message: "Nested mappings are not allowed in compact mappings" },
    ]);
  });

  it("rejects duplicate keys, naming the line", async () => {
    const issues = await issuesOfText(yaml`
      upstreams:
        - name: a
          baseUrl: https://a.example.com
          name: b
    `);
    expect(issues).toEqual([{ path: "line 4, column 5", message: "Map keys must be unique" }]);
  });

  it("rejects tabs as indentation and several documents", async () => {
    expect((await issuesOfText("upstreams:\n\t- name: a\n")).map((i) => i.path)).toContain(
      "line 2, column 1",
    );
    expect(await issuesOfText("upstreams: []\n---\nupstreams: []\n")).toEqual([
      {
        path: "line 2, column 1",
        message: "Source contains multiple documents; please use YAML.parseAllDocuments()",
      },
    ]);
  });

  it("puts the file's path in the error header", async () => {
    await expect(
      loadConfig({ configText: "a: [", configFile: "/etc/bp.yaml", env: {} }),
    ).rejects.toThrow(
      /^invalid configuration in \/etc\/bp\.yaml \(1 problem\)\n {2}line 1, column 5: /,
    );
  });

  it("reads YAML 1.2: yes/on stay strings, so booleans must be true/false", async () => {
    const issues = await issuesOfText(yaml`
      upstreams:
        - { name: a, baseUrl: "https://a.example.com", clientId: i, clientSecret: s, stripPrefix: yes }
    `);
    expect(issues).toEqual([
      {
        path: "upstreams[0] (a).stripPrefix",
        message: 'expected true or false, found "yes" (line 2)',
      },
    ]);
  });

  it("supports anchors and << merge keys for shared upstream settings", async () => {
    const { config: merged } = await loadConfigWithWarnings({
      env: {},
      configText: yaml`
        upstreams:
          - &common
            name: a
            baseUrl: https://api.example.com
            clientId: id
            clientSecret: s
          - <<: *common
            name: b
            match: { pathPrefix: /b }
      `,
    });
    expect(merged.upstreams.map((u) => [u.name, u.baseUrl, u.match.pathPrefix])).toEqual([
      ["a", "https://api.example.com", "/"],
      ["b", "https://api.example.com", "/b"],
    ]);
  });

  it("passes parser warnings on (unknown tags)", async () => {
    const { warnings } = await loadConfigWithWarnings({
      env: {},
      configText:
        "upstreams:\n  - { name: a, baseUrl: !url 'https://a.example.com', clientId: i, clientSecret: s }\n",
    });
    expect(warnings).toEqual(["line 2, column 25: Unresolved tag: !url"]);
  });
});
