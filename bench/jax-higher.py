"""JAX jit on the six workloads of bench/higher.mjs, timed the same way (bench/measure.mjs).

    node bench/jax-data.mjs /tmp/jax-data.json
    python3 bench/jax-higher.py /tmp/jax-data.json [--only gp50,mlp] [--grad]

--grad times jit(value_and_grad) of gp50, gp200, regression and mlp instead: the
first-order rows of bench/run.mjs, on the same models and data.

Objectives follow bench/models.mjs and bench/higher-models.mjs formula for formula;
errors are against the plain-JS exact references written by jax-data.mjs.
"""
import argparse
import json
import time

import jax

jax.config.update('jax_enable_x64', True)
jax.config.update('jax_cpu_enable_async_dispatch', False)
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve

MLP_KEYS = ['W1', 'b1', 'W2', 'b2']


def arr(x):  # float64 always: JSON writes whole numbers (e.g. the zero biases) as ints
    return jnp.asarray(x, dtype=jnp.float64)


def gp(d):
    D2, y = arr(d['D2']), arr(d['y'])
    eye = jnp.eye(len(d['y']))

    def f(p):  # p = (l, v)
        K = p[1] * jnp.exp(-D2 / (2 * p[0] ** 2)) + 0.05 * eye
        L = jnp.linalg.cholesky(K)
        logdet = 2 * jnp.sum(jnp.log(jnp.diag(L)))
        return -0.5 * y @ cho_solve((L, True), y) - 0.5 * logdet

    return f, jax.jit(jax.hessian(f)), (arr(d['params']),), d['exact']


def regression(d):
    X, y = arr(d['X']), arr(d['y'])
    n = X.shape[0]

    def f(q):  # q = (intercept, beta[13], logSigma)
        z = (y - (X @ q[1:-1] + q[0])) / jnp.exp(q[-1])
        return -0.5 * jnp.sum(z**2) - n * q[-1]

    return f, jax.jit(jax.hessian(f)), (arr(d['params']),), d['exact']


def rd(d):
    DL, k = arr(d['DL']), d['k']
    return None, jax.jit(jax.jacfwd(lambda u: DL @ u + k * u**2 * (1 - u))), (arr(d['u']),), d['exact']


def mlp(d):
    X, y = arr(d['X']), arr(d['y'])
    tree = lambda t: {k: arr(t[k]['data']).reshape(t[k]['shape']) for k in MLP_KEYS}

    def loss(p):
        return jnp.mean((jnp.tanh(X @ p['W1'] + p['b1']) @ p['W2'] + p['b2'] - y) ** 2)

    def hvp(p, v):  # forward-over-reverse
        return jax.jvp(jax.grad(loss), (p,), (v,))[1]

    return loss, jax.jit(hvp), (tree(d['params']), tree(d['direction'])), d['exact']


WORKLOADS = {'gp50': gp, 'gp200': gp, 'regression': regression, 'rd30': rd, 'rd100': rd, 'mlp': mlp}


def flat(r):
    if isinstance(r, dict):
        return np.concatenate([np.ravel(r[k]) for k in MLP_KEYS])
    return np.ravel(np.asarray(r))


def rel_err(got, want):  # as relErr in bench/higher.mjs
    want = np.ravel(np.asarray(want, dtype=np.float64))
    return np.max(np.abs(flat(got) - want)) / max(np.max(np.abs(want)), 1e-300)


def measure(fn, batches=15, batch_s=0.05, warmup_s=0.2):
    """Median of batch means, µs per call; like bench/measure.mjs with 50 ms batches."""
    t0, calls = time.perf_counter(), 0
    while calls < 3 or time.perf_counter() - t0 < warmup_s:
        fn()
        calls += 1
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= batch_s:
            break
        n = n * 10 if dt <= 0 else max(n * 2, int(np.ceil(n * batch_s * 1.1 / dt)))
    means = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        means.append((time.perf_counter() - t0) * 1e6 / n)
    return float(np.median(means))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('data', help='JSON written by node bench/jax-data.mjs')
    ap.add_argument('--only', help='comma-separated workloads')
    ap.add_argument('--grad', action='store_true', help='time jit(value_and_grad) of the scalar objectives')
    a = ap.parse_args()
    data = json.load(open(a.data))
    names = a.only.split(',') if a.only else [n for n in WORKLOADS if not (a.grad and n.startswith('rd'))]

    what = 'jit(value_and_grad)' if a.grad else 'jit(hessian), jacfwd, a jit hvp'
    print(f'bench/jax-higher.py, {what}, jax {jax.__version__} on {jax.devices()[0].platform}, median µs per call (15 batches)\n')
    print(f'{"workload":<12} | {"median µs":>10} | {"first call ms":>13} | {"error vs exact":>14}')
    print(f'{"-" * 12}-|-{"-" * 10}:|-{"-" * 13}:|-{"-" * 14}:')
    for name in names:
        objective, fn, args, exact = WORKLOADS[name](data[name])
        if a.grad:  # no exact gradient in the data: the error column is left empty
            fn, args = jax.jit(jax.value_and_grad(objective)), args[:1]
        call = lambda: jax.block_until_ready(fn(*args))
        t0 = time.perf_counter()
        result = call()
        first = (time.perf_counter() - t0) * 1e3
        err = '—' if a.grad else f'{rel_err(result, exact):.1e}'
        us = measure(call)
        print(f'{name:<12} | {us:>10.1f} | {first:>13.1f} | {err:>14}', flush=True)


if __name__ == '__main__':
    main()
