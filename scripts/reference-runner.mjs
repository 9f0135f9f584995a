// Reads JSONL calls on stdin: {"id","fn","args"}; writes JSONL results: {"id","ok":value} or {"id","throws":{name,message}}.
// Encoding in args: {"$float":"NaN"|"Infinity"|"-Infinity"|"-0"} -> number; {"$date": str} -> new Date(str);
// {"$undefined":true} -> undefined. Output: non-finite numbers -> {"$float":...}; Date -> {"$date": iso | "Invalid"}.
import * as tc from 'transparent-confidence';
import readline from 'node:readline';

function decode(v) {
  if (Array.isArray(v)) return v.map(decode);
  if (v !== null && typeof v === 'object') {
    const keys = Object.keys(v);
    if (keys.length === 1 && keys[0] === '$float') {
      const s = v.$float;
      if (s === 'NaN') return NaN;
      if (s === 'Infinity') return Infinity;
      if (s === '-Infinity') return -Infinity;
      if (s === '-0') return -0;
      return Number(s);
    }
    if (keys.length === 1 && keys[0] === '$date') return new Date(v.$date);
    if (keys.length === 1 && keys[0] === '$datems') return new Date(v.$datems);
    if (keys.length === 1 && keys[0] === '$undefined') return undefined;
    const out = {};
    for (const k of keys) Object.defineProperty(out, k, { value: decode(v[k]), enumerable: true, writable: true, configurable: true });
    return out;
  }
  return v;
}

function encode(v) {
  if (v instanceof Date) {
    const t = v.getTime();
    return { $date: Number.isNaN(t) ? 'Invalid' : v.toISOString() };
  }
  if (typeof v === 'number') {
    if (Number.isNaN(v)) return { $float: 'NaN' };
    if (v === Infinity) return { $float: 'Infinity' };
    if (v === -Infinity) return { $float: '-Infinity' };
    return v;
  }
  if (Array.isArray(v)) return v.map((x) => (x === undefined ? null : encode(x)));
  if (v !== null && typeof v === 'object') {
    const out = {};
    for (const k of Object.keys(v)) {
      if (v[k] === undefined) continue;
      Object.defineProperty(out, k, { value: encode(v[k]), enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
  return v;
}

function call(fn, args) {
  switch (fn) {
    case 'computeConfidence':
      return tc.computeConfidence(...args);
    case 'createScorer': {
      const [config, batch] = args;
      let scorer;
      try {
        scorer = tc.createScorer(config);
      } catch (e) {
        return { constructThrows: { name: e.name, message: String(e.message) } };
      }
      return {
        results: batch.map((inputs) => {
          try {
            return { ok: encode(scorer.compute(inputs)) };
          } catch (e) {
            return { throws: { name: e.name, message: String(e.message) } };
          }
        }),
      };
    }
    case 'analyzeCalibration':
      return tc.analyzeCalibration(...args);
    case 'mergeEvaluationSignals':
      return tc.mergeEvaluationSignals(...args);
    case 'fromRagasLike':
      return tc.fromRagasLike(...args);
    case 'fromDeepEvalLike':
      return tc.fromDeepEvalLike(...args);
    case 'fromTruLensLike':
      return tc.fromTruLensLike(...args);
    case 'fromCustomJudge':
      return tc.fromCustomJudge(...args);
    default:
      throw new Error('unknown fn ' + fn);
  }
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
const out = [];
let n = 0;
for await (const line of rl) {
  if (!line.trim()) continue;
  const { id, fn, args } = JSON.parse(line);
  let rec;
  try {
    const value = call(fn, decode(args));
    rec = { id, ok: encode(value) };
  } catch (e) {
    rec = { id, throws: { name: e.name, message: String(e.message) } };
  }
  out.push(JSON.stringify(rec));
  if (out.length >= 1000) {
    process.stdout.write(out.join('\n') + '\n');
    out.length = 0;
  }
  n++;
}
if (out.length) process.stdout.write(out.join('\n') + '\n');
