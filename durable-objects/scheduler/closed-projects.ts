// Which autopilot projects are closed to every queued run (../shared/spec/run-lifecycle.md, "Queue
// and dispatch"), for the claim's head read to leave out (SchedulerGates.closedProjects). A
// project's verdict is kept in memory and computed again only when something it depends on
// changes: its gates, its slots, or the clock reaching its dispatch window's next edge. So a claim
// with unchanged gates computes no verdict, however many projects the organization has. In memory
// only: SchedulerObject lists why losing it to an eviction is safe.

/** A project's verdict for the head read, and until when it holds (Infinity: until a change). */
export interface ClosedVerdict {
  closed: boolean;
  untilMs: number;
}

export class ClosedProjects {
  /** The closed projects; one closed or seen crowding a head goes to the end, and the last ones are sent (`list`). */
  private readonly closed = new Set<string>();
  /** Projects whose verdict ends at a window edge, by when. Projects open until a change are not kept. */
  private readonly expiries = new Map<string, number>();
  private nextExpiryMs = Infinity;
  /** Projects changed since their verdict was computed; every project before the first read. */
  private readonly stale = new Set<string>();
  private loaded = false;
  /** The last answer of `list`, until the closed projects or their order change. */
  private sent: string[] | null = null;
  /** Verdicts computed since the object started (the scheduler's readStats). */
  computed = 0;

  constructor(
    private readonly projects: () => string[],
    private readonly verdict: (projectId: string, nowMs: number) => ClosedVerdict,
  ) {}

  /** The project's gates or slots changed: its verdict is computed again at the next read. */
  changed(projectId: string): void {
    this.stale.add(projectId);
  }

  /**
   * At most `max` closed projects for one head read: those most recently closed or seen crowding a
   * head. The others' runs are left out in the scheduler (`isClosed`), and `crowding` puts their
   * projects in the next read's list.
   */
  list(nowMs: number, max: number): string[] {
    this.refresh(nowMs);
    this.sent ??= [...this.closed].slice(Math.max(0, this.closed.size - max));
    return this.sent;
  }

  isClosed(projectId: string): boolean {
    return this.closed.has(projectId);
  }

  /** A head read listed a run of this closed project: the next read leaves its runs out. */
  crowding(projectId: string): void {
    if (!this.closed.delete(projectId)) return;
    this.closed.add(projectId);
    this.sent = null;
  }

  private refresh(nowMs: number): void {
    if (!this.loaded) {
      for (const id of this.projects()) this.stale.add(id);
      this.loaded = true;
    }
    if (nowMs >= this.nextExpiryMs) this.expire(nowMs);
    for (const id of this.stale) this.compute(id, nowMs);
    this.stale.clear();
  }

  /** A window edge passed: the verdicts it ends are computed again. */
  private expire(nowMs: number): void {
    this.nextExpiryMs = Infinity;
    for (const [id, untilMs] of this.expiries) {
      if (untilMs <= nowMs) this.stale.add(id);
      else this.nextExpiryMs = Math.min(this.nextExpiryMs, untilMs);
    }
  }

  private compute(projectId: string, nowMs: number): void {
    this.computed += 1;
    const { closed, untilMs } = this.verdict(projectId, nowMs);
    if (closed && !this.closed.has(projectId)) {
      this.closed.add(projectId);
      this.sent = null;
    } else if (!closed && this.closed.delete(projectId)) {
      this.sent = null;
    }
    if (untilMs === Infinity) {
      this.expiries.delete(projectId);
      return;
    }
    this.expiries.set(projectId, untilMs);
    this.nextExpiryMs = Math.min(this.nextExpiryMs, untilMs);
  }
}
