"""Prints the largest relative error of the device's approximate square root over every
positive normal float (the float filter's bound from 0 builds on it), in units of u = 2^-24.

    python benchmarks/gpu_micro/sqrt_error.py
"""
import time

from mdakit_fastrdf.engine import _cuda_module

m = _cuda_module()
t0 = time.perf_counter()
e = m.sqrt_approx_error(0)
t = time.perf_counter() - t0
print(f"sqrt.approx.ftz.f32 on {m.devices()[0]['name']}: "
      f"max relative error {e:.6e} = {e * 2**24:.4f} u (2^{__import__('math').log2(e):.3f}), "
      f"measured over 2^31 inputs in {t * 1e3:.1f} ms (first call, with the module's start-up)")
