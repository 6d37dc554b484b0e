// Semantic versions, as the runner reports its own (`cli_version`) and the server gates on it
// (../shared/spec/dispatch-lifecycle.md, "The API enforces the minimum CLI version").

/** A semantic version: major, minor, patch and its prerelease identifiers (build metadata is ignored). */
export interface Version {
  core: [number, number, number];
  prerelease: string[];
}

export function parseVersion(v: string): Version | null {
  const m = /^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z.-]*)?$/.exec(v.trim());
  return m ? { core: [Number(m[1]), Number(m[2]), Number(m[3])], prerelease: m[4] ? m[4].split(".") : [] } : null;
}

/** Semver precedence (semver.org, item 11): negative when a < b, 0 when equal, positive when a > b. */
export function compareVersions(a: Version, b: Version): number {
  for (let i = 0; i < 3; i++) if (a.core[i] !== b.core[i]) return a.core[i] - b.core[i];
  // A prerelease is below its release: 0.2.0-rc.1 < 0.2.0.
  if (a.prerelease.length === 0 || b.prerelease.length === 0) return b.prerelease.length - a.prerelease.length;
  for (let i = 0; i < Math.min(a.prerelease.length, b.prerelease.length); i++) {
    const x = a.prerelease[i];
    const y = b.prerelease[i];
    if (x === y) continue;
    const xNum = /^\d+$/.test(x);
    const yNum = /^\d+$/.test(y);
    if (xNum && yNum) return Number(x) - Number(y);
    if (xNum !== yNum) return xNum ? -1 : 1; // numeric identifiers sort below alphanumeric ones
    return x < y ? -1 : 1;
  }
  return a.prerelease.length - b.prerelease.length;
}

/** True when `version` is at least `minimum`; an unparsable version is never enough. */
export function versionAtLeast(version: string, minimum: string): boolean {
  const a = parseVersion(version);
  const b = parseVersion(minimum);
  if (!a || !b) return false;
  return compareVersions(a, b) >= 0;
}
