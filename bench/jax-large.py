"""JAX jit(value_and_grad) on the GP of bench/models.mjs at n = 500, 1000 and 2000,
timed as bench/large.mjs times this package: median ms of 31, 11 and 5 calls after
one warm-up call, the first call (trace and XLA compile) apart.

    python3 bench/jax-large.py [--sizes 500,1000,2000]   # in a venv with jax; OPENBLAS_* unset

The data are bench/models.mjs's gpData, regenerated here from the same LCG; the value
printed should match this package's to ~1e-12.
"""
import argparse
import math
import time

import jax

jax.config.update('jax_enable_x64', True)
jax.config.update('jax_cpu_enable_async_dispatch', False)
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve


def lcg(seed):
    s = seed & 0xFFFFFFFF

    def next_():
        nonlocal s
        s = (s * 1664525 + 1013904223) & 0xFFFFFFFF
        return s / 4294967296

    return next_


def normal(r):
    u, v = max(r(), 1e-12), r()
    return math.sqrt(-2 * math.log(u)) * math.cos(2 * math.pi * v)


def gp_data(n):
    r = lcg(3)
    xs = sorted(10 * r() for _ in range(n))
    y = [math.sin(x) + 0.15 * math.cos(4 * x) + 0.1 * normal(r) for x in xs]
    return jnp.asarray(xs), jnp.asarray(y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--sizes', default='500,1000,2000')
    for n in map(int, ap.parse_args().sizes.split(',')):
        xs, y = gp_data(n)
        D2 = (xs[:, None] - xs[None, :]) ** 2
        eye = jnp.eye(n)

        def f(p, D2=D2, y=y, eye=eye):
            K = p['v'] * jnp.exp(-D2 / (2 * p['l'] ** 2)) + 0.05 * eye
            L = jnp.linalg.cholesky(K)
            return -0.5 * y @ cho_solve((L, True), y) - jnp.sum(jnp.log(jnp.diag(L)))

        g = jax.jit(jax.value_and_grad(f))
        p = {'l': jnp.float64(1.2), 'v': jnp.float64(0.9)}
        t0 = time.perf_counter()
        value, grad = g(p)
        jax.block_until_ready(grad)
        first = (time.perf_counter() - t0) * 1e3
        g(p)
        ms = []
        for _ in range(31 if n <= 500 else 11 if n <= 1000 else 5):
            t0 = time.perf_counter()
            jax.block_until_ready(g(p))
            ms.append((time.perf_counter() - t0) * 1e3)
        print(f'n = {n}: JAX {np.median(ms):.1f} ms per call (first call {first:.0f} ms), value {float(value):.12g}', flush=True)


if __name__ == '__main__':
    main()
