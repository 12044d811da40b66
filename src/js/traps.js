// A WebAssembly core that traps (a Rust panic: a bug) may be left
// mid-update, so its binding (wasm.js) replaces the instance. Here: every
// function of a binding made to pass what it throws through a handler,
// and the exports of a core that cannot be used again.

/**
 * `binding` with each function wrapped so that what it throws goes through
 * `onThrow` (wasm.js turns a trap into an Error and starts a new instance).
 * Each wrapper takes its function's own arity: passing more arguments than
 * a function declares cost a visible share of small calls.
 */
export function guardAll(binding, onThrow) {
  const guard = (f) => {
    switch (f.length) {
      case 0:
      case 1:
        return (a) => {
          try {
            return f(a);
          } catch (err) {
            throw onThrow(err);
          }
        };
      case 2:
      case 3:
        return (a, b, c) => {
          try {
            return f(a, b, c);
          } catch (err) {
            throw onThrow(err);
          }
        };
      default:
        return (a, b, c, d, e, g, h, k) => {
          try {
            return f(a, b, c, d, e, g, h, k);
          } catch (err) {
            throw onThrow(err);
          }
        };
    }
  };
  for (const [name, f] of Object.entries(binding)) binding[name] = guard(f);
  return binding;
}

/**
 * Exports whose every function throws `message`, a core that cannot be used
 * again; but for its frees, which finalizers call and which have nothing
 * left to free.
 */
export const unusable = (message) =>
  new Proxy(
    {},
    {
      get: (_, name) =>
        String(name).endsWith('_free')
          ? () => {}
          : () => {
              throw new Error(message);
            },
    },
  );
