// The Agent Brief: the part of an issue the agent is given, in a section of the issue body under a
// configured heading (default "## Agent Brief"), written as `key: value` lines (docs/autopilot.md,
// "The Agent Brief"). An issue without a valid brief is not eligible (../shared/spec/run-lifecycle.md,
// "Admission"), and the errors are written for the person who wrote the issue, by line.

import { z } from "zod";

export const BRIEF_KEYS = ["goal", "acceptance", "scope", "model"] as const;
type BriefKey = (typeof BRIEF_KEYS)[number];
const LIST_KEYS = new Set<BriefKey>(["acceptance", "scope"]);

/** A path in the repository the agent should keep to: relative, no `..`, globs allowed. */
const scopePath = z
  .string()
  .min(1, "is empty")
  .max(300, "is longer than 300 characters")
  .regex(/^[A-Za-z0-9._\-/*?{},[\]@+ ]+$/, "is not a repository path (letters, digits and . _ - / * ? only)")
  .refine((p) => !p.startsWith("/"), "must be relative to the repository root (no leading /)")
  .refine((p) => !p.split("/").includes(".."), "must stay inside the repository (no ..)");

export const AgentBrief = z.object({
  goal: z.string().min(1, "is empty").max(4_000, "is longer than 4000 characters"),
  acceptance: z.array(z.string().min(1, "is empty").max(500, "is longer than 500 characters")).max(30, "has more than 30 items"),
  scope: z.array(scopePath).max(50, "has more than 50 paths"),
  model: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}$/, "is not a model name (letters, digits and . _ : / -, at most 100)")
    .nullable(),
});
export type AgentBrief = z.infer<typeof AgentBrief>;

export type BriefResult = { ok: true; brief: AgentBrief } | { ok: false; errors: string[] };

const HEADING = /^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/;
const FENCE = /^ {0,3}(```|~~~)/;
const KEY_LINE = /^([A-Za-z][A-Za-z _-]*?)[ \t]*:[ \t]*(.*)$/;
const ITEM_LINE = /^[ \t]*[-*+][ \t]+(.*)$/;
const COMMENT_LINE = /^[ \t]*<!--.*-->[ \t]*$/;

interface Section {
  /** The body's lines of the section, after its heading, with their 1-based line numbers. */
  lines: { n: number; text: string }[];
}

/** Every section under `heading` (compared without case): its lines up to the next heading of its level or above. */
function findSections(lines: string[], heading: string): Section[] {
  const want = heading.trim().toLowerCase();
  const sections: Section[] = [];
  let current: (Section & { level: number }) | null = null;
  let inFence = false;
  lines.forEach((text, i) => {
    if (FENCE.test(text)) inFence = !inFence;
    const h = inFence ? null : HEADING.exec(text);
    if (h) {
      const level = h[1].length;
      if (current && level <= current.level) current = null;
      if (h[2].trim().toLowerCase() === want) {
        current = { level, lines: [] };
        sections.push(current);
        return;
      }
    }
    current?.lines.push({ n: i + 1, text });
  });
  return sections;
}

interface Parsed {
  values: { goal?: string; acceptance?: string[]; scope?: string[]; model?: string };
  /** The line each key, and each list item, was written on, for errors about them. */
  lineOf: Map<string, number>;
  errors: string[];
}

function keyOf(raw: string): BriefKey | null {
  const key = raw.trim().toLowerCase();
  return (BRIEF_KEYS as readonly string[]).includes(key) ? (key as BriefKey) : null;
}

/** Reads `key: value` lines, `- item` lines under a list key, and continuation lines. */
function readLines(section: Section): Parsed {
  const parsed: Parsed = { values: {}, lineOf: new Map(), errors: [] };
  let key: BriefKey | null = null;
  for (const { n, text } of section.lines) {
    if (text.trim() === "" || FENCE.test(text) || COMMENT_LINE.test(text)) continue;
    const item = ITEM_LINE.exec(text);
    const match = item ? null : KEY_LINE.exec(text);
    // A bare URL is text, not a key.
    const keyed = match && !/^https?$/i.test(match[1].trim()) ? match : null;
    if (keyed && keyOf(keyed[1])) {
      key = keyOf(keyed[1])!;
      if (parsed.lineOf.has(key)) {
        parsed.errors.push(`line ${n}: "${key}" is given twice (first on line ${parsed.lineOf.get(key)}); keep one`);
        key = null;
        continue;
      }
      parsed.lineOf.set(key, n);
      const value = keyed[2].trim();
      if (LIST_KEYS.has(key)) {
        parsed.values[key as "acceptance" | "scope"] = [];
        if (value !== "") {
          parsed.errors.push(`line ${n}: "${key}" is a list; put each entry on its own line starting with "- "`);
        }
      } else {
        parsed.values[key as "goal" | "model"] = value;
      }
    } else if (item && key && LIST_KEYS.has(key)) {
      const list = parsed.values[key as "acceptance" | "scope"]!;
      parsed.lineOf.set(`${key}.${list.length}`, n);
      list.push(item[1].trim());
    } else if (!item && !keyed && key === "goal" && parsed.values.goal !== undefined) {
      // A goal may run over several lines.
      parsed.values.goal = `${parsed.values.goal}\n${text.trim()}`.trim();
    } else if (keyed) {
      parsed.errors.push(`line ${n}: "${keyed[1].trim()}" is not a brief key; the keys are ${BRIEF_KEYS.join(", ")}`);
      key = null;
    } else if (item) {
      parsed.errors.push(`line ${n}: a list entry belongs under "acceptance:" or "scope:"`);
    } else {
      parsed.errors.push(`line ${n}: this line belongs to no key; write "goal: …" or another key (${BRIEF_KEYS.join(", ")})`);
    }
  }
  return parsed;
}

/** Errors in the order of the lines they name; errors about the whole section last. */
function byLine(errors: string[]): string[] {
  const lineOf = (e: string) => Number(/^line (\d+):/.exec(e)?.[1] ?? Infinity);
  return [...errors].sort((a, b) => lineOf(a) - lineOf(b));
}

/**
 * The issue's Agent Brief, or every error found in it, each phrased for the issue's author and
 * naming its line of the issue body where it has one.
 */
export function parseAgentBrief(body: string, heading: string): BriefResult {
  const lines = body.replace(/\r\n?/g, "\n").split("\n");
  const title = `"## ${heading}"`;
  const sections = findSections(lines, heading);
  if (sections.length === 0) return { ok: false, errors: [`the issue has no ${title} section; add one with at least "goal: …" (docs/autopilot.md, "The Agent Brief")`] };
  if (sections.length > 1) return { ok: false, errors: [`the issue has ${sections.length} ${title} sections; keep one`] };

  const parsed = readLines(sections[0]);
  if (parsed.values.goal === undefined && parsed.errors.length === 0 && parsed.lineOf.size === 0) {
    return { ok: false, errors: [`the ${title} section is empty; write at least "goal: …"`] };
  }
  const errors = [...parsed.errors];
  if (parsed.values.goal === undefined) errors.push(`the ${title} section has no "goal: …" line saying what the agent should achieve`);
  const candidate = {
    goal: parsed.values.goal ?? "",
    acceptance: parsed.values.acceptance ?? [],
    scope: parsed.values.scope ?? [],
    model: parsed.values.model === undefined || parsed.values.model === "" ? null : parsed.values.model,
  };
  const checked = AgentBrief.safeParse(candidate);
  if (!checked.success) {
    for (const issue of checked.error.issues) {
      if (issue.path[0] === "goal" && parsed.values.goal === undefined) continue;
      const [field, index] = issue.path.map(String);
      const line = parsed.lineOf.get(issue.path.map(String).join(".")) ?? parsed.lineOf.get(field);
      const what = index !== undefined ? `${field} entry "${candidate[field as "scope"][Number(index)]}"` : `"${field}"`;
      errors.push(`${line ? `line ${line}: ` : ""}${what} ${issue.message}`);
    }
  }
  return errors.length > 0 ? { ok: false, errors: byLine(errors) } : { ok: true, brief: checked.data! };
}
