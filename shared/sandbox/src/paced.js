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
((limit) => {
  'use strict';
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
  for (const name of O.getOwnPropertyNames(proto)) {
    const d = getOwnPropertyDescriptor(proto, name);
    if (name === 'constructor' || typeof d.value !== 'function') continue;
    defineProperty(proto, name, { ...d, value: paced(name, d.value) });
  }
  defineProperty(proto, iterator, { ...getOwnPropertyDescriptor(proto, iterator), value: proto.values });
})
