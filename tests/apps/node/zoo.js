// zoo.js: what every Node app of the zoo shares: flags, the attempt plan, async workers, the JSON report
// (the same keys as tests/apps/python/zoo.py; run_app.py reads them).
'use strict';

const MAX_DISTINCT_ERRORS = 50;
const NO_SQL_CODE = 0;
const ALREADY_CLAIMED = 'claimguard: already claimed';

function parseArgs(argv) {
  const args = {host: '127.0.0.1', campaign: 1, threads: 24, users: 300, firstUser: 1, attempts: 3, seed: 1,
                variant: ''};
  const names = {'--host': 'host', '--ports': 'ports', '--user': 'user', '--password': 'password',
                 '--database': 'database', '--campaign': 'campaign', '--threads': 'threads', '--users': 'users',
                 '--first-user': 'firstUser', '--attempts': 'attempts', '--seed': 'seed', '--variant': 'variant'};
  for (let i = 0; i < argv.length; i += 2) {
    const key = names[argv[i]];
    if (!key || i + 1 >= argv.length) throw new Error(`unknown or incomplete flag ${argv[i]}`);
    args[key] = argv[i + 1];
  }
  for (const k of ['campaign', 'threads', 'users', 'firstUser', 'attempts', 'seed']) args[k] = Number(args[k]);
  args.ports = String(args.ports).split(',').map(Number);
  return args;
}

// mulberry32: a small seeded generator, so a seed gives the same plan on every run.
function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// (code, message) of what a driver or ORM threw: errno/sqlMessage down .parent/.original/.cause.
function sqlError(e) {
  for (let x = e, depth = 0; x && depth < 5; x = x.parent || x.original || x.cause, depth++) {
    if (typeof x.errno === 'number') return [x.errno, String(x.sqlMessage || x.message)];
  }
  return [NO_SQL_CODE, `${e && e.name}: ${e && e.message}`];
}

// app: {name, pod(port, args), attempt(pod, user, trace, args) -> 'claimed'|'sold_out_app'|'conflicts', close(pod)}
async function main(app) {
  const args = parseArgs(process.argv.slice(2));
  const plan = [];
  for (let u = args.firstUser; u < args.firstUser + args.users; u++) {
    for (let a = 0; a < args.attempts; a++) plan.push(u);
  }
  const rnd = random(args.seed);
  for (let i = plan.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [plan[i], plan[j]] = [plan[j], plan[i]];
  }
  const counts = {claimed: 0, sold_out_app: 0, conflicts: 0};
  const claimedUsers = [];
  const alreadyClaimed = new Set();   // told claimguard's "already claimed": must hold an order at the end
  const errors = new Map();
  let attempts = 0;
  let next = 0;
  const pods = await Promise.all(args.ports.map((port) => app.pod(port, args)));

  async function worker(pod) {
    const trace = {statement: '', who: null};
    for (let i = next++; i < plan.length; i = next++) {
      trace.statement = '';
      trace.who = null;
      attempts++;
      try {
        const kind = await app.attempt(pod, plan[i], trace, args);
        counts[kind]++;
        if (kind === 'claimed') claimedUsers.push(trace.who === null ? plan[i] : trace.who);
      } catch (e) {
        const [code, message] = sqlError(e);
        if (message.includes(ALREADY_CLAIMED)) alreadyClaimed.add(trace.who === null ? plan[i] : trace.who);
        let key = JSON.stringify([trace.statement, code, message.replace(/[0-9]+/g, 'N')]);
        if (errors.size >= MAX_DISTINCT_ERRORS && !errors.has(key)) {
          key = JSON.stringify([trace.statement, code, '(other messages)']);
        }
        errors.set(key, (errors.get(key) || 0) + 1);
      }
    }
  }

  const began = process.hrtime.bigint();
  await Promise.all(Array.from({length: args.threads}, (_, i) => worker(pods[i % pods.length])));
  const elapsed = Number(process.hrtime.bigint() - began) / 1e9;
  await Promise.all(pods.map((pod) => app.close(pod)));
  const out = {
    app: app.name, variant: args.variant, attempts_planned: plan.length, attempts, claimed: counts.claimed,
    sold_out_app: counts.sold_out_app, conflicts: counts.conflicts, claimed_users: claimedUsers.sort((a, b) => a - b),
    already_claimed_users: [...alreadyClaimed].sort((a, b) => a - b),
    errors: [...errors.entries()].sort().map(([k, n]) => {
      const [statement, code, message] = JSON.parse(k);
      return {statement, code, message, count: n};
    }),
    setup_errors: [], elapsed_s: elapsed,
  };
  process.stdout.write(JSON.stringify(out) + '\n');
}

function run(app) {
  main(app).then(() => process.exit(0), (e) => {
    process.stderr.write(`${app.name}: ${e && e.stack}\n`);
    process.exit(1);
  });
}

module.exports = {run};
