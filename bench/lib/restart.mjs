/**
 * `--fresh` (bench/run.mjs): a competitor's process is started again before every round after
 * the first, so what one process happened to be (what V8 optimised and when, where things
 * landed in memory) is one round's luck rather than the whole run's verdict. The competitor
 * object the run holds stays the same; only the fields that belong to its process change.
 */

/** What a start returns that belongs to the process; key, label, headers, variant stay put. */
const PROCESS_FIELDS = [
  "baseUrl",
  "adminUrl",
  "child",
  "readyMs",
  "pids",
  "isDead",
  "stop",
  "spanDrops",
];

/**
 * Give `competitor` a `restart()`: stop its process, `startAgain()` a new one, take over the
 * new process's fields. `beforeStop(competitor)` runs while the old process still answers
 * (reading its counters), `afterStop(competitor)` once it has exited (its last log lines in).
 */
export function makeRestartable(competitor, startAgain, { beforeStop, afterStop } = {}) {
  competitor.processesStarted = 1;
  competitor.restart = async () => {
    await beforeStop?.(competitor);
    await competitor.stop();
    await afterStop?.(competitor);
    const next = await startAgain();
    for (const field of PROCESS_FIELDS) {
      if (field in next) competitor[field] = next[field];
    }
    competitor.processesStarted += 1;
  };
  return competitor;
}

/**
 * Restart every live competitor that can be; one that fails to come back is a problem and is
 * left dead (the matrix skips dead competitors). Returns those restarted.
 */
export async function restartAll(competitors, { log, problems }) {
  const restarted = [];
  for (const competitor of competitors) {
    if (!competitor.restart || competitor.isDead()) continue;
    try {
      await competitor.restart();
      restarted.push(competitor);
    } catch (error) {
      problems.push(`${competitor.key} failed to restart: ${error.message}`);
      log(`${competitor.key} failed to restart: ${error.message}`);
      competitor.isDead = () => true;
    }
  }
  log(`fresh processes: ${restarted.map((c) => c.key).join(", ") || "none"}`);
  return restarted;
}
