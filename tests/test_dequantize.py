"""Dequantizing a GGUF-style model gives float32 weights equal to ``q * scale + bias`` to float32 rounding.

GGUF's Q4_1/Q8_0 scales and offsets are float16; the products must not be rounded to float16 on the way.
"""

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest

from ropepool.loaders.gguf import dequantize_model
from ropepool.loaders.tiny import tiny


def unpacked(packed: np.ndarray, bits: int) -> np.ndarray:
    """The integer codes of MLX's packing: ``32 / bits`` codes per uint32, the lowest bits first."""
    per = 32 // bits
    shifts = np.arange(per, dtype=np.uint64) * bits  # [per]
    codes = (packed.astype(np.uint64)[..., None] >> shifts) & ((1 << bits) - 1)  # [rows, words, per]
    return codes.reshape(packed.shape[0], -1)


@pytest.mark.parametrize("bits", [4, 8])
def test_weights_are_float32_exact_from_float16_scales(bits):
    model = tiny("llama", num_attention_heads=4, num_key_value_heads=2, vocab_size=96)
    nn.quantize(model, group_size=32, bits=bits)
    expected = {}
    for path, m in model.named_modules():
        if isinstance(m, (nn.QuantizedLinear, nn.QuantizedEmbedding)):
            m.scales, m.biases = m.scales.astype(mx.float16), m.biases.astype(mx.float16)  # as a GGUF has them
            codes = unpacked(np.array(m.weight), bits).astype(np.float64)  # [rows, in]
            per_group = lambda a: np.repeat(np.array(a.astype(mx.float32), np.float64), 32, axis=1)  # noqa: E731
            scale, bias = per_group(m.scales), per_group(m.biases)
            expected[path] = (codes * scale + bias, codes * np.abs(scale) + np.abs(bias))  # value, magnitude
    dequantize_model(model, mx.float32)
    found = dict(model.named_modules())
    assert isinstance(found["model.embed_tokens"], nn.Embedding) and isinstance(
        found["model.layers.0.mlp.up_proj"], nn.Linear
    )
    for path, (want, magnitude) in expected.items():
        got = found[path].weight
        assert got.dtype == mx.float32, path
        err = np.abs(np.array(got, np.float64) - want)
        bound = np.finfo(np.float32).eps * magnitude  # a float32 rounding of q*s and one of the sum
        assert np.all(err <= bound), f"{path}: {np.max(err / bound):.1f}x the float32 bound"
    ids = mx.array([[1, 5, 7]])
    assert found["model.embed_tokens"](ids).dtype == mx.float32
