// A run's history (the events of `keepgoing history export`) as steps, attempts,
// waits and memory writes: what the timeline, the inspector, replay and diff show.
// Pure: the same events always give the same model, so replay is just a prefix.

const WAIT_START = {
  TimerStarted: "timer",
  MessageWaitStarted: "message",
  EventWaitStarted: "event",
  ChildStarted: "child",
};

export function buildModel(events, { now } = {}) {
  const run = {
    workflowId: "",
    runId: "",
    name: "",
    input: {},
    queue: "",
    status: "running",
    startedAt: null,
    endedAt: null,
    result: undefined,
    error: null,
    blockedReason: null,
    codeVersion: "",
  };
  const steps = [];
  const byCmd = new Map();
  const waits = [];
  const waitByKey = new Map();
  const openMessageWaits = [];
  const losses = [];
  const messages = [];
  const sent = [];
  const children = [];
  const memory = [];
  const activations = [];
  const uncertain = []; // steps whose outcome waits for a reviewer's decision
  let last = null;

  for (const e of events) {
    last = e;
    switch (e.type) {
      case "WorkflowStarted":
        Object.assign(run, {
          workflowId: e.workflow_id,
          runId: e.run_id,
          name: e.workflow_name,
          input: e.input,
          queue: e.task_queue,
          startedAt: e.at,
          codeVersion: e.code_version,
        });
        break;
      case "ActivationCompleted":
        activations.push({ seq: e.seq, at: e.at, worker: e.worker, sawUpto: e.saw_upto });
        break;
      case "TaskScheduled": {
        const step = {
          cmd: e.cmd,
          name: e.name,
          args: e.args,
          kwargs: e.kwargs,
          retries: e.retries,
          timeout: e.timeout,
          scheduledAt: e.at,
          scheduledSeq: e.seq,
          attempts: [],
          status: "scheduled",
          output: undefined,
          error: null,
          memory: [],
          reused: null,
          endedAt: null,
          completedSeq: null,
          // A step a reviewer sent back to run again keeps the first step's operation id.
          operationId: e.operation_id ?? `op-${run.runId}-${e.cmd}`,
          index: steps.length,
        };
        steps.push(step);
        byCmd.set(e.cmd, step);
        break;
      }
      case "TaskAttemptFailed": {
        const step = byCmd.get(e.cmd);
        if (!step) break;
        const prev = step.attempts[step.attempts.length - 1];
        step.attempts.push({
          n: e.attempt,
          worker: e.worker,
          start: e.started_at ?? (prev ? prev.end : step.scheduledAt),
          end: e.at,
          outcome: e.reason,
          error: e.error,
          retryAt: e.retry_at,
          seq: e.seq,
          cause: e.cause ?? null,
          why: causeText(e.reason, e.cause, e.actor, e.via),
          kind: retryKind(e.reason, e.error),
        });
        step.status = e.retry_at != null ? "retrying" : "failing";
        if (e.reason === "worker_lost") losses.push({ worker: e.worker, at: e.at, seq: e.seq, cmd: e.cmd, step: step.name });
        break;
      }
      case "TaskCompleted": {
        const step = byCmd.get(e.cmd);
        if (!step) break;
        const prev = step.attempts[step.attempts.length - 1];
        step.attempts.push({
          n: e.attempt,
          worker: e.worker,
          start: e.started_at ?? (prev ? prev.end : step.scheduledAt),
          end: e.at,
          outcome: "completed",
          error: null,
          seq: e.seq,
          kind: "completed",
        });
        Object.assign(step, { status: "completed", output: e.result, endedAt: e.at, completedSeq: e.seq });
        break;
      }
      case "TaskFailed": {
        const step = byCmd.get(e.cmd);
        if (!step) break;
        // An uncertain outcome waits for a reviewer (see the Reviews page), it has not failed.
        const status = e.reason === "uncertain" ? "uncertain" : "failed";
        Object.assign(step, { status, error: e.error, endedAt: e.at, failReason: e.reason, failedSeq: e.seq });
        if (status === "uncertain") {
          uncertain.push(step);
          for (const m of messages) settleReview([step], m); // a decision sent before the wait
        }
        break;
      }
      case "TaskCancelRequested": {
        const step = byCmd.get(e.cmd);
        if (step && !["completed", "failed", "uncertain"].includes(step.status)) {
          Object.assign(step, { status: "cancelled", endedAt: e.at });
        }
        break;
      }
      case "MemoryCommitted": {
        const write = { volume: e.volume, version: e.version, paths: e.paths, ref: e.ref, cmd: e.cmd, attempt: e.attempt, at: e.at, seq: e.seq };
        memory.push(write);
        const step = byCmd.get(e.cmd);
        if (step) step.memory.push(write);
        break;
      }
      case "MessageReceived": {
        messages.push({ name: e.name, payload: e.payload, sender: `${e.sender_kind}:${e.sender_id}`, senderKind: e.sender_kind, senderId: e.sender_id, at: e.at, seq: e.seq, id: e.message_id });
        settleReview(uncertain, messages[messages.length - 1]);
        const i = openMessageWaits.findIndex((w) => w.name === e.name);
        if (i >= 0) {
          const [wait] = openMessageWaits.splice(i, 1);
          endWait(wait, e.at, `received from ${e.sender_kind} ${e.sender_id}`);
        }
        break;
      }
      case "MessageSent":
        sent.push({ cmd: e.cmd, to: e.workflow_id, name: e.name, payload: e.payload, at: e.at, seq: e.seq, delivered: null });
        break;
      case "MessageDelivered": {
        const s = sent.find((m) => m.cmd === e.cmd);
        if (s) s.delivered = e.error ? `not delivered: ${e.error.message}` : "delivered";
        break;
      }
      case "ChildRunStarted": {
        const child = children.find((c) => c.cmd === e.cmd);
        if (child) Object.assign(child, { runId: e.run_id, error: e.error });
        break;
      }
      case "ChildEnded": {
        const child = children.find((c) => c.cmd === e.cmd);
        if (child) Object.assign(child, { status: e.status, result: e.result, endedAt: e.at });
        const wait = waitByKey.get(`child:${e.cmd}`);
        if (wait) endWait(wait, e.at, `child ${e.status}`);
        break;
      }
      case "TimerFired":
      case "TimerCancelled": {
        const wait = waitByKey.get(`timer:${e.cmd}`);
        if (wait) endWait(wait, e.at, e.type === "TimerFired" ? "fired" : "cancelled");
        break;
      }
      case "EventReceived":
      case "EventWaitCancelled": {
        const wait = waitByKey.get(`event:${e.cmd}`);
        if (wait) endWait(wait, e.at, e.type === "EventReceived" ? `event ${e.event_id}` : "cancelled");
        break;
      }
      case "WorkflowCompleted":
        Object.assign(run, { status: "completed", result: e.result, endedAt: e.at });
        break;
      case "WorkflowFailed":
        Object.assign(run, { status: "failed", error: e.error, endedAt: e.at });
        break;
      case "WorkflowCancelled":
        Object.assign(run, { status: "cancelled", endedAt: e.at });
        break;
      case "WorkflowContinuedAsNew":
        Object.assign(run, { status: "continued", endedAt: e.at });
        break;
      case "WorkflowBlocked":
        Object.assign(run, { status: "blocked", blockedReason: e.reason });
        break;
      default:
        break;
    }
    const kind = WAIT_START[e.type];
    if (kind) {
      const wait = {
        kind,
        cmd: e.cmd,
        start: e.at,
        end: null,
        seq: e.seq,
        label: waitLabel(e),
        planned: e.type === "TimerStarted" ? e.fire_at : e.deadline ?? null,
        outcome: null,
        name: e.name,
      };
      waits.push(wait);
      waitByKey.set(`${kind}:${e.cmd}`, wait);
      if (kind === "message") openMessageWaits.push(wait);
      if (kind === "child") children.push({ cmd: e.cmd, workflowId: e.workflow_id, name: e.workflow_name, input: e.input, status: "running", runId: null });
    }
    if (run.status === "blocked" && e.type === "ActivationCompleted") run.status = "running";
  }
  // A wait with no outcome yet stays open up to the run's end (or now, while it runs).
  const end = run.endedAt ?? now ?? (last ? last.at : null);
  for (const step of steps) {
    if (step.status === "scheduled" || step.status === "retrying") {
      const prev = step.attempts[step.attempts.length - 1];
      const from = prev ? (prev.retryAt ?? prev.end) : step.scheduledAt;
      if (run.endedAt == null) {
        step.current = { start: from, end, outcome: "running" };
        if (step.status === "scheduled" && step.attempts.length === 0) step.status = "running";
      }
    }
  }
  for (const wait of waits) {
    if (wait.end === null) wait.openEnd = end;
  }
  markReused(steps, losses, activations);
  return {
    run,
    steps,
    waits,
    losses,
    messages,
    sent,
    children,
    memory,
    activations,
    events,
    first: events.length ? events[0].at : null,
    last: end,
  };
}

function endWait(wait, at, outcome) {
  wait.end = at;
  wait.outcome = outcome;
}

function waitLabel(e) {
  switch (e.type) {
    case "TimerStarted":
      return `timer until ${new Date(e.fire_at * 1000).toISOString().slice(11, 19)}Z`;
    case "MessageWaitStarted":
      return `waiting for message "${e.name}"`;
    case "EventWaitStarted":
      return `waiting for event ${e.event_type}/${e.correlation_id}`;
    case "ChildStarted":
      return `child ${e.workflow_name} (${e.workflow_id})`;
    default:
      return e.type;
  }
}

// A step finished before a worker was lost, and the worker that took over replayed
// the history: it reused the saved output instead of running the step again.
function markReused(steps, losses, activations) {
  for (const loss of losses) {
    const replacement = activations.find((a) => a.seq > loss.seq && a.worker && a.worker !== loss.worker);
    if (!replacement) continue;
    for (const step of steps) {
      if (step.completedSeq !== null && step.completedSeq < loss.seq && !step.reused) {
        step.reused = { by: replacement.worker, lost: loss.worker, at: replacement.at };
      }
    }
  }
}

const CAUSE_TEXT = {
  scaled_down: "worker scaled down",
  drain_timeout: "worker stopped: its drain timed out",
  replaced: "worker replaced by a newer revision",
  hung_restart: "worker restarted itself (too many hung task threads)",
  oom_killed: "worker ran out of memory (OOMKilled)",
  unexplained: "worker lost (no known cause)",
};
const VIA_TEXT = { ui: "from the UI", cli: "from the CLI", api: "through the API" };

/** Why a lost or released attempt's worker stopped, in words (as `keepgoing show`
 * says it: _store/stops.py's describe); null for an attempt that ended otherwise. */
export function causeText(reason, cause, actor, via) {
  if (reason !== "worker_lost" && reason !== "released") return null;
  if (cause === "killed_by_request") {
    const where = VIA_TEXT[via || ""] || (via ? `(${via})` : "on request");
    return `worker killed ${where}${actor ? ` by ${actor}` : ""}`;
  }
  if (cause && CAUSE_TEXT[cause]) return actor && cause !== "unexplained" ? `${CAUSE_TEXT[cause]} by ${actor}` : CAUSE_TEXT[cause];
  if (reason === "released") return "worker shut down and handed the attempt back";
  return cause ? `worker lost (${cause})` : "worker lost";
}

// The rate-limit rule of keepgoing/_store/trouble.py (is_rate_limited): the error's type
// or message names a 429, a rate limit or "too many requests". tests/ui checks that the
// two agree.
const RATE_LIMIT = /\b429\b|rate[ _-]?limit|too many requests/i;

/** What kind of retry an ended attempt is: completed, rate_limited (a 429), error,
 * timeout, worker_lost, released or uncertain. Each has its own colour and shape. */
export function retryKind(reason, error) {
  if (reason === "error" && error && (RATE_LIMIT.test(error.type || "") || RATE_LIMIT.test(error.message || ""))) return "rate_limited";
  return reason;
}

const DECISIONS = new Set(["approve", "retry", "fail"]);

// A review decision for an uncertain step: the first `review:<operation id>` message
// whose payload decides this round (`cmd`), taken in send order as the workflow takes
// them (keepgoing/_workflow/review.py's parse_decision).
function settleReview(uncertain, e) {
  if (!e.name.startsWith("review:") || e.decided) return;
  const p = e.payload;
  if (!p || typeof p !== "object" || !DECISIONS.has(p.decision) || typeof p.cmd !== "number") return;
  const step = uncertain.find((s) => !s.review && s.cmd === p.cmd && e.name === `review:${s.operationId}`);
  if (!step) return;
  e.decided = true;
  step.review = {
    decision: p.decision,
    by: `${e.senderKind} ${e.senderId}`,
    reason: typeof p.reason === "string" ? p.reason : "",
    result: p.result,
    at: e.at,
    seq: e.seq,
  };
  if (p.decision === "approve") Object.assign(step, { status: "approved", output: p.result });
  else if (p.decision === "fail") step.status = "failed";
  else step.status = "sent_back";
}

const DECIDED = { approve: "approved", retry: "sent back to run again", fail: "failed" };

/** "approved by user alice: the CRM shows version 4", for a step a reviewer decided. */
export function reviewText(review) {
  return `${DECIDED[review.decision]} by ${review.by}${review.reason ? `: ${review.reason}` : ""}`;
}

const PROBLEM_TEXT = {
  worker_lost: "worker lost",
  rate_limited: "rate-limited (429), retried",
  error: "error",
  timeout: "timed out",
  uncertain: "uncertain outcome",
};

/** The run's problems, in the order a person should see them: each worker loss first
 * (one stop per lost worker, with every step it took down), then the steps waiting
 * for a review, then every other failed attempt in order (one stop per step and kind).
 * Each stop names the step to open (`cmd`), the steps it covers, and `seq`: the event
 * after which replay shows it resolved (the retry that completed, or the failure). */
export function problems(model) {
  const stops = [];
  const byWorker = new Map();
  const done = (step) => step.completedSeq ?? step.failedSeq ?? null;
  for (const loss of model.losses) {
    const step = model.steps.find((s) => s.cmd === loss.cmd);
    const attempt = step ? step.attempts.find((a) => a.seq === loss.seq) : null;
    let stop = byWorker.get(loss.worker);
    if (!stop) {
      stop = { kind: "worker_lost", worker: loss.worker, cmd: loss.cmd, cmds: [], names: [], seq: loss.seq, at: loss.at, why: attempt ? attempt.why : "worker lost" };
      byWorker.set(loss.worker, stop);
      stops.push(stop);
    }
    stop.cmds.push(loss.cmd);
    stop.names.push(loss.step);
    const resolved = step ? done(step) : null;
    stop.seq = Math.max(stop.seq, resolved ?? loss.seq);
  }
  for (const stop of stops) stop.label = `${stop.why}: ${stop.names.join(", ")}${stop.worker ? ` (${stop.worker})` : ""}`;
  const review = [];
  const others = [];
  for (const step of model.steps) {
    if (step.failReason === "uncertain") {
      review.push({ kind: "uncertain", cmd: step.cmd, cmds: [step.cmd], seq: step.failedSeq, at: step.endedAt, label: `${step.name} #${step.cmd}: ${step.review ? reviewText(step.review) : "uncertain outcome, waiting for review"}` });
    }
    const kinds = new Map();
    for (const a of step.attempts) {
      if (!["rate_limited", "error", "timeout"].includes(a.kind)) continue;
      if (!kinds.has(a.kind)) kinds.set(a.kind, { first: a, n: 0 });
      kinds.get(a.kind).n += 1;
    }
    for (const [kind, { first, n }] of kinds) {
      const resolved = done(step);
      others.push({ kind, cmd: step.cmd, cmds: [step.cmd], seq: resolved ?? first.seq, at: first.end, label: `${step.name} #${step.cmd}: ${PROBLEM_TEXT[kind]}${n > 1 ? ` ×${n}` : ""}${first.error ? ` (${first.error.type})` : ""}` });
    }
  }
  others.sort((a, b) => a.at - b.at || a.cmd - b.cmd);
  return [...stops, ...review, ...others];
}

/** Every bar the timeline draws for a step: attempts, then the open one. */
export function bars(step) {
  const found = step.attempts.map((a) => ({ ...a }));
  if (step.current) found.push({ ...step.current, n: step.attempts.length + 1, worker: "" });
  return found;
}

/** How long a step took from its schedule to its end (or null while open). */
export function stepDuration(step) {
  return step.endedAt != null ? step.endedAt - step.scheduledAt : null;
}
