// The prelude of every run, after the host's globals and before the customization's source:
// array methods and string searches paced to the deadline, then the host's globals frozen. It is a module compiled
// to bytecode once a process (lib.rs, `prelude`), so a run loads it rather than parsing it.

// The host's globals, which the script may neither replace nor change.
const HOST = ['console', 'env', '__api', 'sha256', 'getHmacSHA256Signature',
  'base64EncodeToString', 'jwtDecodeJwt', 'jwtDecodeVerify', 'jwtVerify', 'jwtCreateSignedJwt'];

let installed = false;

// Once a context: a second call (a script that imports this module) changes nothing.
export default (limit, budget) => {
  if (installed) return;
  installed = true;
  pace(limit);
  searches(budget);
  for (const name of HOST) {
    const value = globalThis[name];
    if (typeof value === 'object') Object.freeze(value);
    Object.defineProperty(globalThis, name, { value, writable: false, configurable: false, enumerable: false });
  }
};

// Array methods that never outrun the run's deadline.
//
// QuickJS asks the interrupt handler only from its bytecode loop. Array.prototype's methods
// loop in C over `length`, which an array with holes (`new Array(2 ** 32 - 1)`) or an
// array-like (`{length: 2 ** 53 - 1}`) sets as high as it likes while allocating nothing:
// `new Array(2 ** 32 - 1).join('')` ran for minutes past a 200 ms deadline. Here each method
// (and each array iterator) runs as before on an array whose length could be held densely,
// and otherwise on a view of its receiver whose every property access is a line of JavaScript,
// so the deadline is asked about as the loop goes. The answers are the same; only the time
// differs.
const pace = (limit) => {
  const { apply, get, set, has, deleteProperty, defineProperty, getOwnPropertyDescriptor } = Reflect;
  const { isArray } = Array;
  const P = Proxy;
  const O = Object;
  const spreadable = Symbol.isConcatSpreadable;
  const iterator = Symbol.iterator;
  const traps = O.freeze({
    get: (t, k) => get(t, k),
    set: (t, k, v) => set(t, k, v),
    has: (t, k) => has(t, k),
    deleteProperty: (t, k) => deleteProperty(t, k),
    defineProperty: (t, k, d) => defineProperty(t, k, d),
    getOwnPropertyDescriptor: (t, k) => getOwnPropertyDescriptor(t, k),
  });
  // An array as long as this could be held densely; a longer one is mostly holes.
  const held = (o) => isArray(o) && o.length <= limit;
  const view = (o) => new P(o, traps);
  const toLength = (n) => {
    const v = Math.trunc(Number(n));
    return v > 0 ? Math.min(v, 2 ** 53 - 1) : 0;
  };
  function* walk(o, kind) {
    for (let i = 0; i < toLength(o.length); i++) {
      yield kind === 'keys' ? i : kind === 'entries' ? [i, o[i]] : o[i];
    }
  }
  const proto = Array.prototype;
  const paced = (name, native) => {
    const iterates = name === 'values' || name === 'keys' || name === 'entries';
    const method = {
      [name](...args) {
        if (this === undefined || this === null) return apply(native, this, args);
        const o = O(this);
        if (iterates) return held(o) ? apply(native, o, args) : walk(o, name);
        if (name === 'concat') {
          for (let i = 0; i < args.length; i++) {
            const a = args[i];
            if (a !== null && typeof a === 'object' && (isArray(a) ? !held(a) : a[spreadable])) args[i] = view(a);
          }
        }
        if (held(o)) return apply(native, o, args);
        const v = view(o);
        const r = apply(native, v, args);
        return r === v ? o : r;
      },
    }[name];
    defineProperty(method, 'length', { value: native.length, configurable: true });
    return method;
  };
  // Assigned, not redefined: each keeps its attributes (writable, configurable, not enumerable).
  for (const name of O.getOwnPropertyNames(proto)) {
    const native = proto[name];
    if (name !== 'constructor' && typeof native === 'function') proto[name] = paced(name, native);
  }
  proto[iterator] = proto.values;
};

// String searches that never outrun the run's deadline.
//
// QuickJS finds a string in a string in C, comparing the two at each place where the first
// character matches: a search of a long run of one letter for half of it and another letter
// (`'a'.repeat(1e7).includes('a'.repeat(5e5) + 'b')`) is one operation of hours, past the
// interrupt's reach. Where the string's length times the searched one's is over `budget`, the
// searches of indexOf, lastIndexOf, includes, split, replace and replaceAll run here instead:
// C finds each place the first character stands (once over the string in all) and compares
// the rest there a short piece at a time, each piece a step of JavaScript, so the deadline is
// asked as they go. The answers are the same; only such searches are slower.
const searches = (budget) => {
  const { apply, defineProperty } = Reflect;
  const S = String.prototype;
  const native = {};
  for (const name of ['indexOf', 'lastIndexOf', 'includes', 'split', 'replace', 'replaceAll']) native[name] = S[name];
  const { startsWith, slice } = S;
  const cut = (s, from, to) => apply(slice, s, [from, to]);
  const { min, max, trunc } = Math;
  const sourceOf = Object.getOwnPropertyDescriptor(RegExp.prototype, 'source').get;
  const { match: matchKey, split: splitKey, replace: replaceKey } = Symbol;
  const isObject = (x) => (typeof x === 'object' && x !== null) || typeof x === 'function';
  // IsRegExp: its @@match where it has one, and otherwise whether it is a RegExp.
  const isRegExp = (x) => {
    if (!isObject(x)) return false;
    const m = x[matchKey];
    if (m !== undefined) return !!m;
    try {
      apply(sourceOf, x, []);
      return true;
    } catch {
      return false;
    }
  };
  const integer = (n) => (n !== n ? 0 : trunc(n));
  const large = (s, t) => t.length > 1 && s.length * t.length > budget;
  // Whether `t` stands at `i` in `s`: compared in C a piece at a time, each piece short.
  const piece = max(2, min(4096, budget));
  const at = (s, t, i) => {
    if (t.length <= piece) return apply(startsWith, s, [t, i]);
    for (let k = 0; k < t.length; k += piece) {
      if (!apply(startsWith, s, [cut(t, k, k + piece), i + k])) return false;
    }
    return true;
  };
  // The first place at or after `from` where `t` (of two characters or more) stands in `s`.
  const first = (s, t, from) => {
    for (let i = from; i + t.length <= s.length; i++) {
      i = apply(native.indexOf, s, [t[0], i]);
      if (i < 0 || i + t.length > s.length) return -1;
      if (at(s, t, i)) return i;
    }
    return -1;
  };
  // The last place at or before `from`.
  const last = (s, t, from) => {
    for (let i = min(from, s.length - t.length); i >= 0; i--) {
      i = apply(native.lastIndexOf, s, [t[0], i]);
      if (i < 0) return -1;
      if (at(s, t, i)) return i;
    }
    return -1;
  };
  // GetSubstitution for a match without captures: `$$`, `$&`, `` $` `` and `$'`; any other `$`
  // stands for itself.
  const substitute = (template, matched, s, position) => {
    if (apply(native.indexOf, template, ['$']) < 0) return template;
    let out = '';
    for (let i = 0; i < template.length; i++) {
      const c = template[i];
      const next = template[i + 1];
      if (c !== '$' || next === undefined) out += c;
      else if (next === '$') (out += '$'), i++;
      else if (next === '&') (out += matched), i++;
      else if (next === '`') (out += cut(s, 0, position)), i++;
      else if (next === "'") (out += cut(s, position + matched.length)), i++;
      else out += c;
    }
    return out;
  };
  const replacing = (name, all) => {
    return {
      [name](searchValue, replaceValue) {
        // No string, or a search the method hands to a RegExp or another matcher: as it was.
        if (this === undefined || this === null
          || (searchValue != null && ((all && isRegExp(searchValue)) || searchValue[replaceKey] != null))) {
          return apply(native[name], this, [searchValue, replaceValue]);
        }
        const s = `${this}`;
        const t = `${searchValue}`;
        const replacer = typeof replaceValue === 'function' ? replaceValue : `${replaceValue}`;
        if (!large(s, t)) return apply(native[name], s, [t, replacer]);
        let out = '';
        let end = 0;
        for (let i = first(s, t, 0); i >= 0; i = all ? first(s, t, i + t.length) : -1) {
          const replacement = typeof replacer === 'function'
            ? `${replacer(t, i, s)}` : substitute(replacer, t, s, i);
          out += cut(s, end, i) + replacement;
          end = i + t.length;
        }
        return out + cut(s, end);
      },
    }[name];
  };
  const methods = {
    indexOf(searchString, position) {
      if (this === undefined || this === null) return apply(native.indexOf, this, [searchString, position]);
      const s = `${this}`;
      const t = `${searchString}`;
      const p = integer(+position);
      if (!large(s, t)) return apply(native.indexOf, s, [t, p]);
      return first(s, t, min(max(p, 0), s.length));
    },
    lastIndexOf(searchString, position) {
      if (this === undefined || this === null) return apply(native.lastIndexOf, this, [searchString, position]);
      const s = `${this}`;
      const t = `${searchString}`;
      const n = +position;
      if (!large(s, t)) return apply(native.lastIndexOf, s, [t, n]);
      return last(s, t, n !== n ? s.length : max(trunc(n), 0));
    },
    includes(searchString, position) {
      if (this === undefined || this === null) return apply(native.includes, this, [searchString, position]);
      const s = `${this}`;
      if (isRegExp(searchString)) return apply(native.includes, s, [searchString, position]);
      const t = `${searchString}`;
      const p = integer(+position);
      if (!large(s, t)) return apply(native.includes, s, [t, p]);
      return first(s, t, min(max(p, 0), s.length)) >= 0;
    },
    split(separator, limit) {
      if (this === undefined || this === null || (separator != null && separator[splitKey] != null)) {
        return apply(native.split, this, [separator, limit]);
      }
      const s = `${this}`;
      const lim = limit === undefined ? 2 ** 32 - 1 : limit >>> 0;
      const t = `${separator}`;
      if (separator === undefined) return apply(native.split, s, [undefined, lim]);
      if (!large(s, t)) return apply(native.split, s, [t, lim]);
      const parts = [];
      if (lim === 0) return parts;
      let end = 0;
      for (let i = first(s, t, 0); i >= 0; i = first(s, t, end)) {
        parts[parts.length] = cut(s, end, i);
        if (parts.length === lim) return parts;
        end = i + t.length;
      }
      parts[parts.length] = cut(s, end);
      return parts;
    },
    replace: replacing('replace', false),
    replaceAll: replacing('replaceAll', true),
  };
  // Assigned, not redefined: each keeps its attributes (writable, configurable, not enumerable).
  for (const name of Object.keys(native)) {
    defineProperty(methods[name], 'length', { value: native[name].length, configurable: true });
    S[name] = methods[name];
  }
};
