// The prelude of every run, after the host's globals and before the customization's source:
// array methods paced to the deadline, then the host's globals frozen. It is a module compiled
// to bytecode once a process (lib.rs, `prelude`), so a run loads it rather than parsing it.

// The host's globals, which the script may neither replace nor change.
const HOST = ['console', 'env', '__api', 'sha256', 'getHmacSHA256Signature',
  'base64EncodeToString', 'jwtDecodeJwt', 'jwtDecodeVerify', 'jwtVerify', 'jwtCreateSignedJwt'];

let installed = false;

// Once a context: a second call (a script that imports this module) changes nothing.
export default (limit) => {
  if (installed) return;
  installed = true;
  pace(limit);
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
