/**
 * `awaitResults`: an exec whose program parks on pending tool calls stays open instead of
 * ending with `waiting`. Each segment's waiting Result is held back here, not sent; the run
 * (stored like any suspended run: a snapshot, no thread) is resumed on this sidecar by the
 * same path as a `wait` (../suspend/resume.ts), as soon as an answer arrives, until the
 * program completes or fails, or `maxAwaitMs` passes (the last waiting Result is sent then,
 * as a plain exec would have). A run parked for a person's approval, a gateway that
 * cancelled, and a sidecar that hands its runs off end it with `waiting` at once. Output
 * carries over from segment to segment, so the one Result lists all of it; the segments'
 * running time is summed against timeoutMs (`budget`), their parked time is not.
 */
import { ResultStatus, WaitReason } from "../../gen/codemode/common/v1/common_pb.js";
import type { RunBudget } from "../suspend/resume.js";
import type { OutputItem } from "./result.js";
import type { ExecEventInit } from "./segment.js";

export class AwaitResults {
  /** The waiting Result of the last segment, not sent (yet). */
  private held: ExecEventInit | undefined;
  readonly budget: RunBudget = { usedMs: 0 };
  readonly untilMs: number;
  /** Output of every segment so far, for the next one's Result. */
  outputs: readonly OutputItem[] = [];

  constructor(
    maxAwaitMs: number,
    private readonly out: (event: ExecEventInit) => void,
    /** The gateway's cancel and the sidecar's drain: either ends the awaiting with what was held. */
    private readonly stops: readonly AbortSignal[],
  ) {
    this.untilMs = Date.now() + maxAwaitMs;
  }

  /** A segment's events: a waiting Result this exec may still resolve is held back; everything else goes out. */
  readonly send = (event: ExecEventInit): void => {
    if (event.case === "result" && this.mayHold(event.value)) {
      this.held = event;
      return;
    }
    this.out(event);
  };

  private mayHold(r: Extract<ExecEventInit, { case: "result" }>["value"]): boolean {
    return r.status === ResultStatus.WAITING && r.reason !== WaitReason.APPROVAL && Date.now() < this.untilMs && !this.stops.some((s) => s.aborted);
  }

  /**
   * Resumes the parked run (`resume` serves one wait segment, which sends or holds its own
   * Result) for as long as segments end held; a held Result that can no longer be resolved
   * (maxAwaitMs passed, cancel, drain) is sent.
   */
  async drive(resume: (untilMs: number) => Promise<void>): Promise<void> {
    while (this.held) {
      const parked = this.held;
      this.held = undefined;
      if (Date.now() >= this.untilMs || this.stops.some((s) => s.aborted)) {
        this.out(parked);
        return;
      }
      await resume(this.untilMs);
    }
  }
}
