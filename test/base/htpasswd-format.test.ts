import bcrypt from "bcryptjs";
import { describe, expect, it } from "vitest";
import { parseHtpasswd } from "../../src/base/htpasswd-format.js";
import { asHtpasswdB, hashPassword } from "../callers/helpers.js";

describe("parseHtpasswd", () => {
  it("reads $2y$ (htpasswd -B), $2a$ and $2b$ users; skips comments and blank lines", async () => {
    const b = hashPassword("pw-b");
    const a = `$2a$${hashPassword("pw-a").slice(4)}`;
    const y = asHtpasswdB(hashPassword("pw:y"));
    expect(b.startsWith("$2b$")).toBe(true);
    const text = `# callers\n\nbob:${b}\r\nann:${a}\n  # indented comment\nyves:${y}\n`;
    const { users, problems } = parseHtpasswd(text, "callers.htpasswd");
    expect(problems).toEqual([]);
    expect([...users.keys()]).toEqual(["bob", "ann", "yves"]);
    // bcryptjs compares every prefix as written; no rewrite to $2b$ is needed.
    expect(await bcrypt.compare("pw-b", users.get("bob")!)).toBe(true);
    expect(await bcrypt.compare("pw-a", users.get("ann")!)).toBe(true);
    expect(await bcrypt.compare("pw:y", users.get("yves")!)).toBe(true);
    expect(await bcrypt.compare("pw-x", users.get("yves")!)).toBe(false);
  });

  it("a literal $2y$ line as htpasswd -B writes it verifies", async () => {
    // bcrypt("secret") at cost 4 with a fixed salt, in the form `htpasswd -nbB -C 4` prints.
    const line = "alice:$2y$04$abcdefghijklmnopqrstuu2r9OfJnfCsdneAXAGHnS4UpFFP8WIrW\n";
    const { users, problems } = parseHtpasswd(line, "f");
    expect(problems).toEqual([]);
    expect(await bcrypt.compare("secret", users.get("alice")!)).toBe(true);
    expect(await bcrypt.compare("Secret", users.get("alice")!)).toBe(false);
  });

  it("rejects non-bcrypt formats by line number, without the hash", () => {
    const text = [
      `ok:${hashPassword("x")}`,
      "md5:$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/",
      "sha:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=",
      "crypt:rl5cFO7z6LOXc",
      "nocolon",
      `weak:$2b$03$${"a".repeat(53)}`,
      `ok:${hashPassword("y")}`,
    ].join("\n");
    const { users, problems } = parseHtpasswd(text, "users.htpasswd");
    expect([...users.keys()]).toEqual(["ok"]);
    expect(problems).toEqual([
      expect.stringMatching(/^users\.htpasswd line 2: user "md5" has no bcrypt hash/),
      expect.stringMatching(/^users\.htpasswd line 3: user "sha" has no bcrypt hash/),
      expect.stringMatching(/^users\.htpasswd line 4: user "crypt" has no bcrypt hash/),
      "users.htpasswd line 5: expected user:hash",
      expect.stringMatching(/^users\.htpasswd line 6: user "weak" has bcrypt cost 3/),
      'users.htpasswd line 7: user "ok" is already on line 1',
    ]);
    const all = problems.join("\n");
    for (const secret of ["HqJZ", "W6ph5", "rl5cFO7", "aaaa", "$apr1$"]) {
      expect(all).not.toContain(secret);
    }
  });
});
