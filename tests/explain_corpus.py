"""Real errors engineers paste, with the model, the true cause, where the text comes from, and what
``explain`` must say. ``tests/test_explain_corpus.py`` runs every row.

Each row: ``text`` as printed; ``model`` (a preset, a config dict, or None) and ``numbers`` (what the
user passes as --num-kv-heads, ...); ``cause`` (the true cause); ``source`` (the framework's file and
version whose format string prints the text: the message was produced by running that version here, or
its format string is quoted and filled with the numbers of the named case); ``reported`` (optional:
where the error was met in the wild); ``expect`` (the diagnosis's case) and ``says`` (phrases the why
or the fix must hold).

Two halves, :data:`TUNE` and :data:`HELD_OUT`, split by :func:`half`: the first byte of the SHA-256 of
the row's ``text``, even for ``tune``, odd for ``held_out``. The split depends on the message alone,
so no one picks which half a row lands in, and a row keeps its half for good. Code is changed to
read ``tune`` rows; ``held_out`` rows are written before the code that reads them and are never used
to tune it: a held-out row that fails is reported, and fixed only as a general reading (never by
wording for that row), with the count of such fixes said where the change is made.
"""

import hashlib

HF_LLAMA3 = "meta-llama/Meta-Llama-3-8B"
QWEN3_32B = {
    "_name_or_path": "Qwen/Qwen3-32B",
    "model_type": "qwen3",
    "hidden_size": 5120,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "rope_theta": 1000000,
}  # the fields of its config.json
QWEN3_VL_30B = dict(num_qo_heads=32, num_kv_heads=4, head_dim=128)  # Qwen3-VL-30B-A3B's config.json

EINSUM = (
    'PyTorch 2.13 aten/src/ATen/native/Linear.cpp (einsum: "einsum(): subscript ", label, " has size ", size, '
    '" for operand ", i, " which does not broadcast with previously seen size ", seen); run here with torch 2.13.0'
)
EINSUM_OLD = (
    'PyTorch 1.1x aten/src/ATen/native/Linear.cpp (einsum: "einsum(): operands do not broadcast with remapped '
    'shapes [original->remapped]:" then " " << sizes << "->" << permuted sizes per operand)'
)
VLLM_LEN = (
    'vLLM 0.10 vllm/config/model.py (_get_and_verify_max_len: f"User-specified max_model_len ({max_model_len}) is '
    "greater than the derived max_model_len ({max_len_key}={derived_max_model_len} or model_max_length="
    "{model_max_length} in model's config.json).\" and the VLLM_ALLOW_LONG_MAX_MODEL_LEN warning), through pydantic"
)
VLLM_LEN_06 = (
    'vLLM 0.6 vllm/config.py (_get_and_verify_max_len: the same format, ending "To allow overriding this maximum, '
    'set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")'
)
VLLM_LEN_03 = (
    'vLLM 0.3 vllm/config.py (_get_and_verify_max_len: f"User-specified max_model_len ({max_model_len}) is greater '
    "than the derived max_model_len ({max_len_key}={derived_max_model_len} in model's config.json).\" ...)"
)
MLX_STRICT = (
    'mlx 0.32.4 python/mlx/nn/layers/base.py (Module.load_weights, strict: f"Received {num_extra} parameters not in '
    'model: \\n{extras}.", the names sorted and joined by ",\\n"); run here'
)
HF_LONGROPE_5 = (
    "transformers 5.25.0 models/phi3/configuration_phi3.py (validate_rope: f\"`rope_parameters`'s short_factor field "
    'must have length {rotary_ndims // 2}, got {len(...)}"); Phi3Config(hidden_size=3072, num_attention_heads=24, '
    "rope_scaling={'type': 'longrope', ...48 factors...}) run here"
)
HF_LONGROPE_4 = (
    "transformers 4.4x models/phi3/configuration_phi3.py (_rope_scaling_validation: f\"`rope_scaling`'s long_factor "
    'field must have length {self.hidden_size // self.num_attention_heads // 2}, got {len(...)}")'
)
HF_LONGROPE_ROPE_UTILS = (
    "transformers 5.25.0 modeling_rope_utils.py (_validate_longrope_parameters, a warning: f\"`rope_parameters`'s "
    'long_factor field must have length {dim // 2}, got {len(long_factor)}")'
)
EXPAND_SRC = (
    'PyTorch 2.13 aten/src/ATen/ExpandUtils.cpp (inferExpandGeometry: "The expanded size of the tensor (", target, '
    '") must match the existing size (", size, ") at non-singleton dimension ", i, ".  Target sizes: ", sizes, '
    '".  Tensor sizes: ", tensor_sizes); run here with torch 2.13.0'
)
INDEX_SRC = (
    'PyTorch 2.13 aten/src/ATen/native/IndexingUtils / TensorAdvancedIndexing.cpp ("index ", idx, " is out of '
    'bounds for dimension ", dim, " with size ", size); pool[slots] = k run here with torch 2.13.0'
)
INDEX_COPY_SRC = (
    'PyTorch 2.13 aten/src/ATen/native/TensorAdvancedIndexing.cpp (index_copy_: "index_copy_(): index ", idx, '
    '" is out of bounds for dimension ", dim, " with size ", size); run here with torch 2.13.0'
)
LOOKUP_SRC = (
    "PyTorch 2.x aten/src/ATen/native/TensorAdvancedIndexing.cpp (index_select_out_cpu_: TORCH_CHECK_INDEX((self_i "
    '>= 0) && (self_i < self_dim_size), "index out of range in self")), as F.embedding reaches it '
    "(aten/src/ATen/native/Embedding.cpp, embedding_symint: weight.index_select(0, indices.reshape(-1)))"
)
NUMPY_INDEX_SRC = (
    'NumPy 2.x numpy/_core/src/multiarray/mapping.c (check_and_adjust_index: "index %" NPY_INTP_FMT " is out of '
    'bounds for axis %d with size %" NPY_INTP_FMT)'
)
LOAD_SRC = (
    "PyTorch 2.13 torch/nn/modules/module.py (_load_from_state_dict: 'size mismatch for {}: copying a param with "
    "shape {} from checkpoint, the shape in current model is {}.'); run here with torch 2.13.0"
)
MLX_SHAPE_SRC = (
    'mlx 0.32.4 python/mlx/nn/layers/base.py (Module.load_weights: f"Expected shape {v.shape} but received shape '
    '{v_new.shape} for parameter {k}")'
)
PHI3_MEDIUM = {
    "_name_or_path": "microsoft/Phi-3-medium-4k-instruct",
    "model_type": "phi3",
    "hidden_size": 5120,
    "num_attention_heads": 40,
    "num_key_value_heads": 10,
    "max_position_embeddings": 4096,
    "rope_theta": 10000.0,
}  # the fields of its config.json
PHI4_MINI_CONFIG = {
    "_name_or_path": "microsoft/Phi-4-mini-instruct",
    "model_type": "phi3",
    "hidden_size": 3072,
    "num_attention_heads": 24,
    "num_key_value_heads": 8,
    "partial_rotary_factor": 0.75,
    "rope_theta": 10000.0,
}  # its config.json's head fields (its longrope scaling left out)
PHI4_MINI = dict(num_qo_heads=24, num_kv_heads=8, head_dim=128, rotary_dim=96)  # Phi-4-mini, as options

CORPUS = [
    # --- transformers / PyTorch ---------------------------------------------------------------------------
    dict(
        id="hf-view-k-with-query-heads",
        model="llama-3-8b",
        text="RuntimeError: shape '[1, 7, 32, 128]' is invalid for input of size 7168",
        cause="k_proj's output (8 KV heads x 128) viewed with num_attention_heads (32) in a hand-written attention",
        source='PyTorch 2.x aten/src/ATen/InferSize.h (infer_size_impl: "shape \'" << shape << "\' is invalid for input of size " << numel)',
        expect="kv_viewed_with_hq",
        says=("num_key_value_heads", "k.view(B, T, 8, 128)"),
    ),
    dict(
        id="hf-tp8-over-4-kv-heads",
        model=None,
        numbers=QWEN3_VL_30B,
        text="RuntimeError: shape '[4, 178, -1, 128]' is invalid for input of size 45568",
        cause="native TP with tp_size=8 over 4 KV heads: 64 features of k_proj per rank, half a head",
        source='PyTorch 2.x aten/src/ATen/InferSize.h (infer_size_impl: "shape \'" << shape << "\' is invalid for input of size " << numel)',
        reported="https://github.com/huggingface/transformers/issues/48307",
        expect="tp_over_kv_heads",
        says=("tp = 8", "tp <= 4"),
    ),
    dict(
        id="hf-gpt-neox-heads-do-not-divide",
        model={"model_type": "gpt_neox", "hidden_size": 1024, "num_attention_heads": 12},
        text="RuntimeError: shape '[1, 5, 12, 255]' is invalid for input of size 15360",
        cause="hidden_size 1024 is not a multiple of 12 heads: head_size = 1024 // 12 = 85 (Isotonic/gpt_neox_225M)",
        source='PyTorch 2.x aten/src/ATen/InferSize.h (infer_size_impl: "shape \'" << shape << "\' is invalid for input of size " << numel)',
        reported="https://github.com/huggingface/transformers/issues/23081",
        expect="heads_do_not_divide_hidden",
        says=("not a multiple of num_attention_heads = 12",),
    ),
    dict(
        id="based-k-projected-with-query-heads",
        model=None,
        numbers=dict(num_qo_heads=8, num_kv_heads=4, head_dim=16),
        text="RuntimeError: shape '[1, 1024, 4, 16]' is invalid for input of size 131072",
        cause="the feature-map k projection was built with num_heads (8) and viewed with num_key_value_heads (4)",
        source='PyTorch 2.x aten/src/ATen/InferSize.h (infer_size_impl: "shape \'" << shape << "\' is invalid for input of size " << numel)',
        reported="https://github.com/HazyResearch/zoology/issues/20",
        expect="ambiguous",
        says=("k/v were projected with num_attention_heads", "q (Hq x D"),
    ),
    dict(
        id="hf-attention-without-repeat-kv",
        model="llama-3-8b",
        text="RuntimeError: The size of tensor a (32) must match the size of tensor b (8) at non-singleton dimension 1",
        cause="eager attention on GQA tensors without repeat_kv: q has 32 heads, k 8",
        source='PyTorch 2.x aten/src/ATen/ExpandUtils.cpp (infer_size_impl: "The size of tensor a (", sizeA, ") must match the size of tensor b (", sizeB, ") at non-singleton dimension ", i)',
        expect="missing_repeat_kv",
        says=("repeat_kv(k, 4)", "enable_gqa=True"),
    ),
    dict(
        id="hf-attention-without-repeat-kv-no-model",
        model=None,
        text="RuntimeError: The size of tensor a (32) must match the size of tensor b (8) at non-singleton dimension 1",
        cause="as above, pasted without the model",
        source='PyTorch 2.x aten/src/ATen/ExpandUtils.cpp (infer_size_impl: "The size of tensor a (", sizeA, ") must match the size of tensor b (", sizeB, ") at non-singleton dimension ", i)',
        expect="ambiguous",
        says=("repeat_kv missing (G = 4)", "tokens"),
    ),
    dict(
        id="ascend-rotary-dim-ignored",
        model=None,
        numbers=dict(head_dim=128, rotary_dim=64),
        text="RuntimeError: The expanded size of the tensor (128) must match the existing size (64) at "
        "non-singleton dimension 3.",
        cause="Ling-1T sets rotary_dim = 64 (not partial_rotary_factor); the kernel built cos/sin for 64 of 128",
        source='PyTorch 2.x aten/src/ATen/ExpandUtils.cpp (inferExpandGeometry: "The expanded size of the tensor (", targetSize, ") must match the existing size (", size, ") at non-singleton dimension ", i)',
        reported="https://github.com/vllm-project/vllm-ascend/pull/6581",
        expect="rotary_dim",
        says=("q[..., :64]", "partial_rotary_factor"),
    ),
    dict(
        id="hf-config-without-num-key-value-heads",
        model="llama-3-8b",
        text="RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:\n\tsize mismatch for "
        "model.layers.0.self_attn.k_proj.weight: copying a param with shape torch.Size([1024, 4096]) from "
        "checkpoint, the shape in current model is torch.Size([4096, 4096]).\n\tsize mismatch for "
        "model.layers.0.self_attn.v_proj.weight: copying a param with shape torch.Size([1024, 4096]) from "
        "checkpoint, the shape in current model is torch.Size([4096, 4096]).",
        cause="a config.json without num_key_value_heads builds MHA k_proj for GQA weights",
        source="PyTorch 2.x torch/nn/modules/module.py (_load_from_state_dict: 'size mismatch for {}: copying a param with shape {} from checkpoint, the shape in current model is {}.')",
        expect="config_without_kv_heads",
        says=("num_key_value_heads = 8",),
    ),
    dict(
        id="hf-qwen3-head-dim-from-hidden",
        model=QWEN3_32B,
        text="size mismatch for model.layers.0.self_attn.q_proj.weight: copying a param with shape "
        "torch.Size([8192, 5120]) from checkpoint, the shape in current model is torch.Size([5120, 5120]).",
        cause="custom modeling code took head_dim = 5120 // 64 = 80; Qwen3-32B sets head_dim = 128",
        source="PyTorch 2.x torch/nn/modules/module.py (_load_from_state_dict: 'size mismatch for {}: copying a param with shape {} from checkpoint, the shape in current model is {}.')",
        expect="head_dim_from_hidden",
        says=("5120 // 64 = 80", "head_dim = 128"),
    ),
    dict(
        id="trtllm-qwen3-qkv-head-dim",
        model=QWEN3_32B,
        text="Error: `Parameter transformer.layers.0.attention.qkv.weight has invalid shape torch.Size([10240, 5120]) "
        "compared with expected shape (6400, 5120)`",
        cause="TensorRT-LLM's Qwen config computed head_dim = hidden_size // num_attention_heads = 80, not 128",
        source='TensorRT-LLM 0.2x tensorrt_llm/models/modeling_utils.py (PretrainedModel.load: f"Parameter {name} has invalid shape {param.shape} compared with expected shape {expected}")',
        reported="https://github.com/NVIDIA/TensorRT-LLM/issues/5912",
        expect="head_dim_from_hidden",
        says=("5120 // 64 = 80", "head_dim = 128"),
    ),
    dict(
        id="hf-4.42-reads-llama31-rope-scaling",
        model="llama-3.1-8b",
        text="ValueError: `rope_scaling` must be a dictionary with two fields, `type` and `factor`, got {'factor': "
        "8.0, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192, "
        "'rope_type': 'llama3'}",
        cause="transformers older than 4.43 loading Llama 3.1 (rope_type llama3)",
        source='transformers 4.36-4.42 models/llama/configuration_llama.py (_rope_scaling_validation: "`rope_scaling` must be a dictionary with two fields, `type` and `factor`, got {self.rope_scaling}")',
        reported="https://github.com/foundation-model-stack/foundation-model-stack/issues/384",
        expect="library_older_than_config",
        says=("transformers>=4.43", "llama3"),
    ),
    dict(
        id="hf-with-with-two-fields",
        model=None,
        text="`rope_scaling` must be a dictionary with with two fields, `type` and `factor`, got {'factor': 8.0, "
        "'high_freq_factor': 4.0, 'low_freq_factor': 1.0, 'original_max_position_embeddings': 8192, "
        "'rope_type': 'llama3'}",
        cause="an old transformers (the 'with with' spelling) reading a Llama 3.1 config",
        source='transformers 4.28-4.31 models/llama/configuration_llama.py (_rope_scaling_validation, spelt "with with two fields")',
        reported="https://github.com/StartHua/Comfyui_CXH_joy_caption/issues/35",
        expect="library_older_than_config",
        says=("Upgrade transformers",),
    ),
    dict(
        id="vllm-worker-two-fields",
        model=None,
        text="ValueError: rope_scaling must be a dictionary with two fields, type and factor",
        cause="vLLM's image pinned a transformers older than its Llama 3.1 config",
        source='transformers 4.36-4.42 models/llama/configuration_llama.py (_rope_scaling_validation: "`rope_scaling` must be a dictionary with two fields, `type` and `factor`, got {self.rope_scaling}")',
        reported="https://github.com/runpod-workers/worker-vllm/issues/89",
        expect="library_older_than_config",
        says=("Upgrade transformers",),
    ),
    dict(
        id="hf5-llama3-fields-missing",
        model="llama-3.1-8b",
        text="KeyError: \"Missing required keys in `rope_parameters` for 'rope_type'='llama3': {'high_freq_factor', "
        "'low_freq_factor'}\"",
        cause="a llama3 rope_scaling trimmed to {rope_type, factor}",
        source="transformers 5.25.0 modeling_rope_utils.py (_check_received_keys), LlamaConfig(rope_scaling={'rope_type': 'llama3', 'factor': 8.0}) (run here)",
        expect="scaling_fields_missing",
        says=("high_freq_factor = 4.0", "low_freq_factor = 1.0"),
    ),
    dict(
        id="hf5-yarn-factor-missing",
        model="qwen2.5-7b-yarn",
        text="KeyError: \"Missing required keys in `rope_parameters` for 'rope_type'='yarn': {'factor'}\"",
        cause="a yarn rope_scaling without its factor",
        source="transformers 5.25.0 modeling_rope_utils.py (_check_received_keys), LlamaConfig(rope_scaling={'rope_type': 'yarn', "
        "'original_max_position_embeddings': 32768}) (run here)",
        expect="scaling_fields_missing",
        says=("factor = 4.0",),
    ),
    dict(
        id="hf5-rope-theta-attribute",
        model="qwen2.5-7b",
        text="AttributeError: 'Qwen2Config' object has no attribute 'rope_theta'",
        cause="code written for transformers 4 reading config.rope_theta under transformers 5",
        source="transformers 5.25.0 configuration_utils.py (PretrainedConfig.__getattribute__: AttributeError \"'{cls}' object has no attribute '{key}'\"); Qwen2Config().rope_theta run here",
        reported="https://github.com/deepspeedai/DeepSpeed/pull/8345",
        expect="ambiguous",
        says=("rope_parameters", "1e+06", "transformers.__version__"),
    ),
    dict(
        id="deepspeed-rope-theta-transformers5",
        model=None,
        text="current code -> AttributeError: 'LlamaConfig' object has no attribute 'rope_theta'",
        cause="DeepSpeed's Llama policy reading config.rope_theta on transformers 5.8",
        source="transformers 5.25.0 configuration_utils.py (PretrainedConfig.__getattribute__: AttributeError \"'{cls}' object has no attribute '{key}'\")",
        reported="https://github.com/deepspeedai/DeepSpeed/pull/8341",
        expect="ambiguous",
        says=("transformers 5 keeps it in config.rope_parameters",),
    ),
    dict(
        id="rope-theta-old-transformers",
        model=None,
        text="AttributeError: 'LlamaConfig' object has no attribute 'rope_theta'",
        cause="a transformers from before LlamaConfig had rope_theta (Llama-2 example, 2024-02)",
        source="transformers 4.30 configuration_utils.py (Python's AttributeError: LlamaConfig had no rope_theta before 4.33)",
        reported="https://github.com/alipay/PainlessInferenceAcceleration/issues/16",
        expect="ambiguous",
        says=("from before LlamaConfig had rope_theta",),
    ),
    dict(
        id="vllm-0.5.5-keyerror-type",
        model="llama-3.1-8b",
        text='llama3.1 70B load error: if rope_scaling is not None and rope_scaling["type"] != "su": '
        "KeyError: 'type'",
        cause="vLLM 0.5.5 code reading rope_scaling['type'] of a Llama 3.1 config that has rope_type",
        source='vLLM 0.5.5 vllm/model_executor/layers/rotary_embedding.py (get_rope: rope_scaling["type"], a KeyError)',
        reported="https://github.com/vllm-project/vllm/issues/9481",
        expect="layout_skew",
        says=("'rope_type'", 'add "type"'),
    ),
    dict(
        id="custom-llama-keyerror-type",
        model=None,
        text='  File "/home/fokus/Thomas/KBLaM/src/kblam/models/llama3_model.py", line 128, in _init_rope\n'
        '    scaling_type = self.config.rope_scaling["type"]\n'
        "                   ~~~~~~~~~~~~~~~~~~~~~~~~^^^^^^^^\nKeyError: 'type'",
        cause="custom Llama code reading rope_scaling['type'] of a config that spells it rope_type",
        source="Python's KeyError of a dict lookup rope_scaling['type'] in the reader's RoPE code (KBLaM 0.1 src/kblam/models/llama3_model.py _init_rope)",
        reported="https://github.com/microsoft/KBLaM/issues/37",
        expect="layout_skew",
        says=("older than the config",),
    ),
    dict(
        id="tgi-keyerror-rope-type",
        model=None,
        text="KeyError: 'rope_type'",
        cause="text-generation-inference reading rope_type from a config that spells it 'type' (per the maintainer)",
        source="Python's KeyError of a dict lookup rope_scaling['rope_type'] in the reader's RoPE code (text-generation-inference 2.2 server/text_generation_server/layers/rotary.py)",
        reported="https://github.com/huggingface/transformers/issues/32167",
        expect="layout_skew",
        says=('Add "rope_type"',),
    ),
    dict(
        id="sglang-keyerror-rope-type",
        model=None,
        text='[Bug]: 执行sglang.launch_server 出现KeyError "rope_type"',
        cause="an SGLang older than the model's config (the maintainers: upgrade SGLang)",
        source="Python's KeyError of a dict lookup rope_scaling['rope_type'] in the reader's RoPE code (SGLang 0.2 python/sglang/srt/models/minicpm3.py)",
        reported="https://github.com/OpenBMB/MiniCPM/issues/269",
        expect="layout_skew",
        says=("upgrade sglang",),
    ),
    dict(
        id="hf-unrecognized-type-warning",
        model=None,
        text="Unrecognized keys in `rope_scaling` for 'rope_type'='linear': {'type'}",
        cause="a config holding both 'type' and 'rope_type': a warning, the scaling is read correctly",
        source="transformers 4.45 modeling_rope_utils.py (_check_received_keys: f\"Unrecognized keys in `rope_scaling` for 'rope_type'='{rope_type}': {unused_keys}\")",
        reported="https://github.com/vllm-project/vllm/issues/6897",
        expect="harmless_warning",
        says=("Nothing to fix",),
    ),
    # --- MLX / mlx-lm --------------------------------------------------------------------------------------
    dict(
        id="mlx-reshape-k-with-query-heads",
        model="llama-3-8b",
        text="ValueError: [reshape] Cannot reshape array of size 7168 into shape (1,7,32,128).",
        cause="k of 8 KV heads reshaped with 32 heads",
        source="mlx 0.32.4 mlx/ops.cpp (reshape), mx.zeros((1, 7, 1024)).reshape(1, 7, 32, 128) (run here)",
        expect="kv_viewed_with_hq",
        says=("num_key_value_heads",),
    ),
    dict(
        id="mlx-reshape-q-with-kv-heads",
        model="qwen2.5-7b",
        text="ValueError: [reshape] Cannot reshape array of size 17920 into shape (1,5,4,128).",
        cause="Qwen2.5-7B's q (28 heads) reshaped with its 4 KV heads",
        source="mlx 0.32.4 mlx/ops.cpp (reshape), mx.zeros((1, 5, 3584)).reshape(1, 5, 4, 128) (run here)",
        expect="ambiguous",
        says=("view q with num_attention_heads",),
    ),
    dict(
        id="mlx-reshape-gemma2-head-dim",
        model="gemma-2-9b",
        text="ValueError: [reshape] Cannot reshape array of size 12288 into shape (1,6,8,224).",
        cause="Gemma-2-9B's head_dim taken as 3584 // 16 = 224; the config sets 256",
        source="mlx 0.32.4 mlx/ops.cpp (reshape), mx.zeros((1, 6, 2048)).reshape(1, 6, 8, 224) (run here)",
        expect="head_dim_from_hidden",
        says=("3584 // 16 = 224", "256"),
    ),
    dict(
        id="mlx-matmul-without-repeat-kv",
        model="llama-3-8b",
        text="ValueError: [broadcast_shapes] Shapes (1,32) and (1,8) cannot be broadcast.",
        cause="q @ k.T with q of 32 heads and k of 8 (no repeat, or a hand-written attention)",
        source="mlx 0.32.4 mlx/ops.cpp (broadcast_shapes), mx.zeros((1, 32, 7, 128)) @ mx.zeros((1, 8, 128, 7)) (run here)",
        expect="missing_repeat_kv",
        says=("mx.fast.scaled_dot_product_attention",),
    ),
    dict(
        id="mlx-phi2-cos-of-rotary-dim",
        model="phi-2",
        text="ValueError: [broadcast_shapes] Shapes (1,32,7,80) and (7,32) cannot be broadcast.",
        cause="Phi-2 rotates 32 of 80 dimensions; cos of 32 multiplied into the whole head",
        source="mlx 0.32.4 mlx/ops.cpp (broadcast_shapes), mx.zeros((1, 32, 7, 80)) * mx.zeros((7, 32)) (run here)",
        expect="rotary_dim",
        says=("q[..., :32]",),
    ),
    dict(
        id="mlx-sdpa-k-not-transposed-qwen",
        model="qwen2.5-7b",
        text="ValueError: [scaled_dot_product_attention] n_heads must be a multiple of n_kv_heads, found n_heads 28 "
        "for n_kv_heads 6.",
        cause="k passed as [B, T, H, D] (6 tokens on the head axis)",
        source="mlx 0.32.4 mlx/fast.cpp, mx.fast.scaled_dot_product_attention(q [1,28,6,128], k [1,6,4,128], ...) (run here)",
        expect="foreign_k",
        says=("transpose(0, 2, 1, 3)",),
    ),
    dict(
        id="mlx-sdpa-keys-values-differ",
        model="llama-3-8b",
        text="ValueError: [scaled_dot_product_attention] keys, values expected to have matching n_kv_heads; found "
        "keys with n_heads 7 for values with n_heads 8.",
        cause="k left as [B, T, H, D], v transposed",
        source="mlx 0.32.4 mlx/fast.cpp, mx.fast.scaled_dot_product_attention(q, k [1,7,8,128], v [1,8,7,128]) (run here)",
        expect="k_layout",
        says=("transpose(0, 2, 1, 3)",),
    ),
    dict(
        id="mlx-rope-on-224-wide-heads",
        model="gemma-2-9b",
        text="ValueError: [rope] dims must not exceed the input's last dimension (224) but got 256.",
        cause="Gemma-2's k viewed with 224 (hidden_size // heads), rope dims from config.head_dim 256",
        source="mlx 0.32.4 mlx/fast.cpp, mx.fast.rope(mx.zeros((1, 8, 6, 224)), 256, ...) (run here)",
        expect="head_dim_from_hidden",
        says=("3584 // 16 = 224",),
    ),
    dict(
        id="mlxlm-config-without-kv-heads",
        model="llama-3-8b",
        text="ValueError: Expected shape (4096, 4096) but received shape (1024, 4096) for parameter "
        "model.layers.0.self_attn.k_proj.weight",
        cause="config.json without num_key_value_heads (mlx-lm defaults it to num_attention_heads)",
        source="mlx 0.32.4 python/mlx/nn/layers/base.py Module.load_weights via an mlx-lm 0.32.2 mlx_lm/models/llama.py Attention(num_key_value_heads=None) "
        "(run here)",
        expect="config_without_kv_heads",
        says=("num_key_value_heads = 8",),
    ),
    dict(
        id="mlxlm-mha-weights-gqa-config",
        model="llama-3-8b",
        text="ValueError: Expected shape (1024, 4096) but received shape (4096, 4096) for parameter "
        "model.layers.0.self_attn.k_proj.weight",
        cause="Llama-2-7B (MHA) weights loaded with a Llama-3-8B config",
        source="mlx 0.32.4 python/mlx/nn/layers/base.py load_weights via mlx-lm 0.32.2 mlx_lm/models/llama.py Attention(num_key_value_heads=8) (run here)",
        expect="weights_of_another_model",
        says=("32 KV heads", "config.json that ships with these weights"),
    ),
    dict(
        id="mlxlm-gemma-q-proj-head-dim",
        model="gemma-2-9b",
        text="ValueError: Expected shape (3584, 3584) but received shape (4096, 3584) for parameter "
        "model.layers.0.self_attn.q_proj.weight",
        cause="a config without head_dim for Gemma-2 weights (q_proj is 16 x 256 = 4096 rows)",
        source="mlx 0.32.4 python/mlx/nn/layers/base.py load_weights via mlx-lm 0.32.2 mlx_lm/models/llama.py Attention(hidden 3584, 16 heads) (run here)",
        expect="head_dim_from_hidden",
        says=("3584 // 16 = 224", "head_dim = 256"),
    ),
    dict(
        id="mlxlm-old-llama-reads-type",
        model="llama-3.1-8b",
        text="ValueError: rope_scaling must contain keys {'type', 'factor'}",
        cause="mlx-lm before Llama 3.1 support reading a rope_type config",
        source='mlx-lm 0.16-0.18 mlx_lm/models/llama.py (ModelArgs.__post_init__: f"rope_scaling must contain keys {required_keys}")',
        reported="https://github.com/ml-explore/mlx-examples/issues/909",
        expect="layout_skew",
        says=("pip install -U mlx-lm",),
    ),
    dict(
        id="mlxlm-old-lora-llama32",
        model=None,
        text="ValueError: rope_scaling must contain keys {'factor', 'type'}",
        cause="Llama 3.2 with an old mlx-examples lora script",
        source='mlx-lm 0.16-0.18 mlx_lm/models/llama.py (ModelArgs.__post_init__: f"rope_scaling must contain keys {required_keys}")',
        reported="https://github.com/transformerlab/transformerlab-app/issues/152",
        expect="layout_skew",
        says=("Upgrade mlx-lm",),
    ),
    dict(
        id="mlxlm-phi3-longrope-rope-type",
        model="phi-3.5-mini",
        text="ValueError: rope_scaling must contain keys {'long_factor', 'type'}",
        cause="a Phi-3.5 config saved with rope_type (no 'type'); mlx-lm's phi3.py reads 'type'",
        source="mlx-lm 0.32.2 mlx_lm/models/phi3.py, ModelArgs(rope_scaling={'rope_type': 'longrope', ...}) (run here)",
        expect="layout_skew",
        says=('add "type"',),
    ),
    dict(
        id="mlxlm-qwen2-yarn-only-linear",
        model=None,
        text="Error: rope_scaling 'type' currently only supports 'linear'",
        cause="a Qwen2.5-Coder yarn config with an mlx-lm whose qwen2 computed only linear scaling",
        source="mlx-lm 0.19 mlx_lm/models/qwen2.py (ModelArgs.__post_init__: \"rope_scaling 'type' currently only supports 'linear'\")",
        reported="https://github.com/ml-explore/mlx-examples/issues/1329",
        expect="library_older_than_config",
        says=("Upgrade mlx-lm",),
    ),
    # --- vLLM / llama.cpp ----------------------------------------------------------------------------------
    dict(
        id="vllm-52-heads-tp3",
        model=None,
        text="ValueError: Total number of attention heads (52) must be divisible by tensor parallel size (3).",
        cause="LLaMA-33B (52 heads) on 3 GPUs",
        source='vLLM 0.1-0.6 vllm/config.py (ModelConfig.verify_with_parallel_config: f"Total number of attention heads ({total_num_attention_heads}) must be divisible by tensor parallel size ({tensor_parallel_size}).")',
        reported="https://github.com/vllm-project/vllm/issues/414",
        expect="tp_does_not_divide_heads",
        says=("[1, 2, 4, 13, 26, 52]",),
    ),
    dict(
        id="vllm-28-heads-tp8",
        model="qwen2.5-7b",
        text="ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8)",
        cause="DeepSeek-R1-Distill-Qwen-7B (Qwen2.5-7B's shapes) with tp 8",
        source='vLLM 0.1-0.6 vllm/config.py (ModelConfig.verify_with_parallel_config: f"Total number of attention heads ({total_num_attention_heads}) must be divisible by tensor parallel size ({tensor_parallel_size}).")',
        reported="https://github.com/THU-KEG/AdaptThink/issues/1",
        expect="tp_does_not_divide_heads",
        says=("[1, 2, 4, 7, 14, 28]", "[1, 2, 4, 28]"),
    ),
    dict(
        id="vllm-gpt2-xl-tp2",
        model=None,
        text="ValueError: Total number of attention heads (25) must be divisible by tensor parallel size (2).",
        cause="gpt2-xl (25 heads) on 2 GPUs",
        source='vLLM 0.1-0.6 vllm/config.py (ModelConfig.verify_with_parallel_config: f"Total number of attention heads ({total_num_attention_heads}) must be divisible by tensor parallel size ({tensor_parallel_size}).")',
        reported="https://github.com/vllm-project/vllm/issues/1705",
        expect="tp_does_not_divide_heads",
        says=("[1, 5, 25]",),
    ),
    dict(
        id="worker-vllm-rope-type-key",
        model=None,
        text="  Value error, rope_scaling should have a 'rope_type' key [type=value_error, input_value=ArgsKwargs((), "
        "{'model': ...rocessor_plugin': None}), input_type=ArgsKwargs]",
        cause="rope_scaling handed to vLLM as a string from an environment variable",
        source="vLLM 0.6-0.10 vllm/transformers_utils/config.py (patch_rope_scaling_dict: \"rope_scaling should have a 'rope_type' key\"), through pydantic's ArgsKwargs validation",
        reported="https://github.com/runpod-workers/worker-vllm/issues/257",
        expect="ambiguous",
        says=("as a string",),
    ),
    dict(
        id="koboldcpp-no-gqa-loader",
        model="llama-3-70b",
        text="error loading model: llama.cpp: tensor 'blk.0.attn_k.weight' has wrong shape; expected  8192,  8192, "
        "got  8192,  1024,     1,     1",
        cause="a loader without GQA support (koboldcpp 1.4.2) assumed as many KV heads as query heads for a 70B",
        source="llama.cpp 2023 llama.cpp (llama_model_loader::get_tensor: \"llama.cpp: tensor '%s' has wrong shape; expected %s, got %s\"), as koboldcpp 1.4x prints it",
        reported="https://github.com/LostRuins/koboldcpp/issues/419",
        expect="config_without_kv_heads",
        says=("head_count_kv",),
    ),
    dict(
        id="llamacpp-mha-tensors-gqa-metadata",
        model="llama-3-8b",
        text="llama_model_load: error loading model: check_tensor_dims: tensor 'blk.0.attn_k.weight' has wrong "
        "shape; expected  4096,  1024, got  4096,  4096,     1,     1",
        cause="a GGUF whose metadata says 8 KV heads holding MHA-sized k tensors (weights of another model)",
        source='llama.cpp b3000 and later src/llama-model-loader.cpp (check_tensor_dims: "%s: tensor \'%s\' has wrong shape; expected %s, got %s", each size "%5" PRId64)',
        expect="weights_of_another_model",
        says=("32 KV heads",),
    ),
    # --- SGLang's and ropepool's own --------------------------------------------------------------------------
    dict(
        id="classic-gqa-bug",
        model="llama-3-8b",
        text="k shape must be [num_tokens, num_kv_heads, head_dim], got (4, 8, 128)\n  expected (4, 32, 128) = "
        "[T, Hkv, D], got (4, 8, 128).",
        cause="num_kv_heads passed as num_attention_heads (notebook 01)",
        source="ropepool 0.1.0 ropepool/errors.py CODES and ropepool/validation.py (SGLang's line, ropepool's second line)",
        expect="num_kv_heads",
        says=("classic GQA bug", "Pass num_kv_heads=8"),
    ),
    dict(
        id="qwen-k-of-32-heads",
        model="qwen2.5-7b",
        text="k shape must be [num_tokens, num_kv_heads, head_dim], got (6, 32, 128)",
        cause="k built with Llama-3-8B's config",
        source="ropepool 0.1.0 ropepool/errors.py CODES (SGLang's rope_pool_fused wrapper text, verbatim)",
        expect="foreign_k",
        says=("llama-3-8b", "[T, 4, 128]"),
    ),
    dict(
        id="gemma2-head-dim-passed-224",
        model="gemma-2-9b",
        text="q shape must be [num_tokens, num_qo_heads, head_dim], got (4, 16, 256)\n  expected (4, 16, 224) = "
        "[T, Hq, D], got (4, 16, 256).",
        cause="head_dim passed as hidden_size // num_attention_heads",
        source="ropepool 0.1.0 ropepool/errors.py CODES and ropepool/validation.py (SGLang's line, ropepool's second line)",
        expect="head_dim_from_hidden",
        says=("Pass head_dim=256",),
    ),
    dict(
        id="k-one-token-longer-with-count",
        model="llama-3-8b",
        numbers=dict(passed_kv_heads=8),
        text="RuntimeError: k shape must be [num_tokens, num_kv_heads, head_dim], got (5, 8, 128)",
        cause="k gathered from 5 tokens, q from 4",
        source="ropepool 0.1.0 ropepool/errors.py CODES (SGLang's rope_pool_fused wrapper text, verbatim)",
        expect="tokens",
        says=("same tokens",),
    ),
    dict(
        id="tp-split-k-zero-heads",
        model="qwen2.5-7b",
        text="k shape must be [num_tokens, num_kv_heads, head_dim], got (6, 0, 128)",
        cause="tp = 8 over 4 KV heads gave a rank no KV head",
        source="ropepool 0.1.0 ropepool/errors.py CODES (SGLang's rope_pool_fused wrapper text, verbatim)",
        expect="zero_heads",
        says=("tp <= Hkv",),
    ),
    # --- einsum without repeat_kv (a) --------------------------------------------------------------------------
    dict(
        id="torch-einsum-llama3-without-repeat-kv",
        model="llama-3-8b",
        text="RuntimeError: einsum(): subscript h has size 8 for operand 1 which does not broadcast with previously "
        "seen size 32",
        cause="scores = torch.einsum('bhqd,bhkd->bhqk', q, k) with q of 32 heads and k of 8, k never repeated",
        source=EINSUM,
        expect="missing_repeat_kv",
        says=("repeat_kv(k, 4)", "einsum"),
    ),
    dict(
        id="torch-einsum-qwen25-without-repeat-kv",
        model="qwen2.5-7b",
        text="RuntimeError: einsum(): subscript h has size 4 for operand 1 which does not broadcast with previously "
        "seen size 28",
        cause="Qwen2.5-7B's 28 query heads against its 4 KV heads in a hand-written einsum attention",
        source=EINSUM,
        expect="missing_repeat_kv",
        says=("repeat_kv(k, 7)",),
    ),
    dict(
        id="torch-einsum-llama3-70b-without-repeat-kv",
        model="llama-3-70b",
        text='  File "attn.py", line 41, in forward\n    w = torch.einsum("bqhd,bkhd->bhqk", q, k)\nRuntimeError: '
        "einsum(): subscript h has size 8 for operand 1 which does not broadcast with previously seen size 64",
        cause="Llama-3-70B ([B, T, H, D] layout): 64 query heads against 8 KV heads",
        source=EINSUM,
        expect="missing_repeat_kv",
        says=("repeat_kv(k, 8)",),
    ),
    dict(
        id="torch-einsum-remapped-mistral",
        model="mistral-7b",
        text="RuntimeError: einsum(): operands do not broadcast with remapped shapes [original->remapped]: "
        "[1, 32, 7, 128]->[1, 32, 7, 1, 128] [1, 8, 7, 128]->[1, 8, 1, 7, 128]",
        cause="Mistral-7B's q (32 heads) and k (8) in torch.einsum('bhqd,bhkd->bhqk'), k not repeated",
        source=EINSUM_OLD,
        expect="missing_repeat_kv",
        says=("repeat_kv(k, 4)",),
    ),
    dict(
        id="torch-einsum-no-model",
        model=None,
        text="RuntimeError: einsum(): subscript h has size 8 for operand 1 which does not broadcast with previously "
        "seen size 32",
        cause="as the Llama-3 einsum case, pasted without the model",
        source=EINSUM,
        expect="ambiguous",
        says=("repeat_kv", "--model"),
    ),
    # --- vLLM's max_model_len above the config's (b) --------------------------------------------------------------
    dict(
        id="vllm-qwen25-128k-without-yarn",
        model="qwen2.5-7b",
        text="(APIServer pid=53)   Value error, User-specified max_model_len (131072) is greater than the derived "
        "max_model_len (max_position_embeddings=32768 or model_max_length=None in model's config.json). To allow "
        "overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must "
        "be used with extreme caution. If the model uses relative position encoding (RoPE), positions exceeding "
        "derived_max_model_len lead to nan. [type=value_error, input_value=ArgsKwargs((), {'model': ...}), "
        "input_type=ArgsKwargs]",
        cause="Qwen2.5-7B served at 128k without the YaRN rope_scaling its card prescribes (factor 4 over 32768)",
        source=VLLM_LEN,
        expect="context_beyond_positions",
        says=('"factor": 4.0', '"original_max_position_embeddings": 32768', "yarn"),
    ),
    dict(
        id="vllm-llama3-32k",
        model="llama-3-8b",
        text="ValueError: User-specified max_model_len (32768) is greater than the derived max_model_len "
        "(max_position_embeddings=8192 or model_max_length=None in model's config.json). This may lead to incorrect "
        "model outputs or CUDA errors. To allow overriding this maximum, set the env var "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
        cause="Llama-3-8B (8k positions) asked for 32k with no RoPE scaling",
        source=VLLM_LEN_06,
        expect="context_beyond_positions",
        says=('"factor": 4.0', '"original_max_position_embeddings": 8192', "--max-model-len 8192"),
    ),
    dict(
        id="vllm-llama31-beyond-its-scaled-context",
        model="llama-3.1-8b",
        text="ValueError: User-specified max_model_len (262144) is greater than the derived max_model_len "
        "(max_position_embeddings=131072 or model_max_length=None in model's config.json). This may lead to incorrect "
        "model outputs or CUDA errors. To allow overriding this maximum, set the env var "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
        cause="Llama 3.1 already scales to 131072 (llama3, factor 8); 262144 is past what it was tuned for",
        source=VLLM_LEN_06,
        expect="context_beyond_scaling",
        says=("llama3", "--max-model-len 131072"),
    ),
    dict(
        id="vllm-old-format-mistral-64k",
        model="mistral-7b",
        text="ValueError: User-specified max_model_len (65536) is greater than the derived max_model_len "
        "(max_position_embeddings=32768 in model's config.json). This may lead to incorrect model outputs or CUDA "
        "errors. Make sure the value is correct and within the model context size.",
        cause="Mistral-7B-v0.1 (32768 positions) asked for 64k",
        source=VLLM_LEN_03,
        expect="context_beyond_positions",
        says=('"factor": 2.0',),
    ),
    dict(
        id="vllm-qwen25-no-model",
        model=None,
        text="ValueError: User-specified max_model_len (131072) is greater than the derived max_model_len "
        "(max_position_embeddings=32768 or model_max_length=None in model's config.json). This may lead to incorrect "
        "model outputs or CUDA errors. To allow overriding this maximum, set the env var "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
        cause="as the Qwen2.5 case, without the model: the numbers alone give the factor",
        source=VLLM_LEN_06,
        expect="context_beyond_positions",
        says=('"factor": 4.0', "VLLM_ALLOW_LONG_MAX_MODEL_LEN"),
    ),
    dict(
        id="vllm-qwen3-coder-1m",
        model=None,
        text="Value error, User-specified max_model_len (1048576) is greater than the derived max_model_len "
        "(max_position_embeddings=262144 or model_max_length=None in model's config.json). This may lead to "
        "incorrect model outputs or CUDA errors. To allow overriding this maximum, set the env var "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 [type=value_error, input_value=ArgsKwargs((), {'model': ...}), "
        "input_type=ArgsKwargs]",
        cause="Qwen3-Coder-480B (262144 positions) asked for 1M tokens without its YaRN factor 4",
        source=VLLM_LEN_06,
        expect="context_beyond_positions",
        says=('"factor": 4.0', '"original_max_position_embeddings": 262144'),
    ),
    # --- an embedding read past its table (i) -----------------------------------------------------------------------
    dict(
        id="torch-embedding-token-id-past-vocab",
        model="llama-3-8b",
        text="IndexError: index out of range in self",
        cause="special tokens added to the tokenizer (ids from 128256 on) and embed_tokens not resized: an input "
        "id past vocab_size reaches F.embedding on CPU",
        source=LOOKUP_SRC,
        expect="ambiguous",
        says=("vocab_size", "input_ids.max()", "resize_token_embeddings", "max_position_embeddings"),
    ),
    # --- MLX's strict load of RoPE buffers (c) ----------------------------------------------------------------------
    dict(
        id="mlx-strict-load-llama-inv-freq",
        model="llama-3-8b",
        text="ValueError: Received 32 parameters not in model: \nmodel.layers.0.self_attn.rotary_emb.inv_freq,\n"
        "model.layers.1.self_attn.rotary_emb.inv_freq,\nmodel.layers.10.self_attn.rotary_emb.inv_freq,\n"
        "model.layers.11.self_attn.rotary_emb.inv_freq,\nmodel.layers.12.self_attn.rotary_emb.inv_freq.",
        cause="a checkpoint saved by an old transformers keeps each layer's inv_freq buffer; mlx's strict load refuses",
        source=MLX_STRICT,
        expect="rope_buffers_in_weights",
        says=("rotary_emb.inv_freq", "sanitize", "rope_theta"),
    ),
    dict(
        id="mlx-strict-load-phi3-inv-freq",
        model="phi-3-mini",
        text="ValueError: Received 32 parameters not in model: \nmodel.layers.0.self_attn.rotary_emb.inv_freq,\n"
        "model.layers.1.self_attn.rotary_emb.inv_freq,\nmodel.layers.10.self_attn.rotary_emb.inv_freq.",
        cause="mlx-lm's phi3 has no sanitize dropping inv_freq; a Phi-3 checkpoint that kept the buffers",
        source=MLX_STRICT,
        expect="rope_buffers_in_weights",
        says=("computed from the config",),
    ),
    dict(
        id="mlx-strict-load-neox-inv-freq-no-model",
        model=None,
        text="ValueError: Received 2 parameters not in model: \ngpt_neox.layers.0.attention.rotary_emb.inv_freq,\n"
        "gpt_neox.layers.1.attention.rotary_emb.inv_freq.",
        cause="a GPT-NeoX (Pythia) checkpoint with its persistent inv_freq buffers, loaded strictly",
        source=MLX_STRICT,
        expect="rope_buffers_in_weights",
        says=("strict=False",),
    ),
    dict(
        id="mlx-strict-load-inv-freq-and-lm-head",
        model="llama-3-8b",
        text="ValueError: Received 2 parameters not in model: \nlm_head.weight,\n"
        "model.layers.0.self_attn.rotary_emb.inv_freq.",
        cause="RoPE buffers plus an lm_head the model (built with tied embeddings) has no room for",
        source=MLX_STRICT,
        expect="rope_buffers_in_weights",
        says=("lm_head.weight",),
    ),
    dict(
        id="mlx-strict-load-qwen25-inv-freq",
        model="qwen2.5-7b",
        text="ValueError: Received 28 parameters not in model: \nmodel.layers.0.self_attn.rotary_emb.inv_freq,\n"
        "model.layers.1.self_attn.rotary_emb.inv_freq,\nmodel.layers.10.self_attn.rotary_emb.inv_freq.",
        cause="a hand-written MLX Qwen2 (no sanitize) loading a checkpoint that kept its 28 layers' inv_freq",
        source=MLX_STRICT,
        expect="rope_buffers_in_weights",
        says=("rotary_emb.inv_freq", "1000000"),
    ),
    dict(
        id="mlx-strict-load-mistral-inv-freq-traceback",
        model="mistral-7b",
        text="Traceback (most recent call last):\n"
        '  File "/srv/app/load.py", line 41, in <module>\n'
        "    model.load_weights(list(weights.items()))\n"
        '  File "/srv/venv/lib/python3.11/site-packages/mlx/nn/layers/base.py", line 185, in load_weights\n'
        "    raise ValueError(\n"
        "ValueError: Received 32 parameters not in model: \n"
        + ",\n".join(f"model.layers.{i}.self_attn.rotary_emb.inv_freq" for i in sorted(range(32), key=str))
        + ".",
        cause="a Mistral-7B checkpoint saved by an old transformers keeps its 32 layers' inv_freq; a hand-written "
        "MLX Mistral without a sanitize loads it strictly (the whole traceback, names one a line)",
        source=MLX_STRICT,
        expect="rope_buffers_in_weights",
        says=("rope_theta = 10000", "64 entries a layer", "rotary_emb.inv_freq"),
    ),
    # --- longrope factor lists on a partial-rotary model (d) ------------------------------------------------------
    dict(
        id="hf5-phi4-mini-short-factor-without-partial-rotary",
        model=None,
        numbers=PHI4_MINI,
        text="ValueError: `rope_parameters`'s short_factor field must have length 64, got 48",
        cause="Phi-4-mini rotates 96 of 128 dims (partial_rotary_factor 0.75): 48 factors are right; the config "
        "reached Phi3Config without partial_rotary_factor",
        source=HF_LONGROPE_5,
        expect="longrope_partial_rotary_not_read",
        says=("48", "partial_rotary_factor", "0.75"),
    ),
    dict(
        id="hf4-phi4-mini-long-factor-old-phi3config",
        model=None,
        numbers=PHI4_MINI,
        text="ValueError: `rope_scaling`'s long_factor field must have length 64, got 48",
        cause="a transformers whose Phi3Config sized the list by head_dim, before partial_rotary_factor was read",
        source=HF_LONGROPE_4,
        expect="longrope_partial_rotary_not_read",
        says=("Do not pad",),
    ),
    dict(
        id="hf-longrope-length-no-model",
        model=None,
        text="`rope_parameters`'s long_factor field must have length 64, got 48",
        cause="as the Phi-4-mini case, without the model",
        source=HF_LONGROPE_ROPE_UTILS,
        expect="ambiguous",
        says=("partial_rotary_factor = 0.75", "another model"),
    ),
    dict(
        id="hf-longrope-list-of-another-model",
        model="phi-3.5-mini",
        text="ValueError: `rope_scaling`'s short_factor field must have length 48, got 64",
        cause="Phi-3.5-mini (head_dim 96, whole head rotates) given the 64-entry factors of a head_dim-128 model",
        source=HF_LONGROPE_4,
        expect="longrope_factors_of_another_model",
        says=("48",),
    ),
    # --- repeat_kv's expand with the counts swapped (e) ----------------------------------------------------------
    dict(
        id="torch-repeat-kv-swapped-llama3",
        model="llama-3-8b",
        text="RuntimeError: The expanded size of the tensor (4) must match the existing size (8) at non-singleton "
        "dimension 1.  Target sizes: [1, 4, 8, 7, 128].  Tensor sizes: [1, 8, 1, 7, 128]",
        cause="repeat_kv wrote expand(batch, n_rep, num_key_value_heads, slen, head_dim): the two counts swapped",
        source=EXPAND_SRC,
        expect="repeat_kv_swapped",
        says=("expand(B, 8, 4, T, 128)",),
    ),
    dict(
        id="torch-repeat-kv-swapped-qwen25",
        model="qwen2.5-7b",
        text="RuntimeError: The expanded size of the tensor (7) must match the existing size (4) at non-singleton "
        "dimension 1.  Target sizes: [1, 7, 4, 5, 128].  Tensor sizes: [1, 4, 1, 5, 128]",
        cause="Qwen2.5-7B: n_rep 7 and 4 KV heads swapped in repeat_kv's expand",
        source=EXPAND_SRC,
        expect="repeat_kv_swapped",
        says=("expand(B, 4, 7, T, 128)",),
    ),
    dict(
        id="torch-repeat-kv-swapped-mistral-batch",
        model="mistral-7b",
        text="RuntimeError: The expanded size of the tensor (4) must match the existing size (8) at non-singleton "
        "dimension 1.  Target sizes: [2, 4, 8, 13, 128].  Tensor sizes: [2, 8, 1, 13, 128]",
        cause="Mistral-7B, batch 2: expand(batch, n_rep, num_key_value_heads, ...)",
        source=EXPAND_SRC,
        expect="repeat_kv_swapped",
        says=("n_rep",),
    ),
    dict(
        id="torch-repeat-kv-swapped-gemma2",
        model="gemma-2-9b",
        text="RuntimeError: The expanded size of the tensor (2) must match the existing size (8) at non-singleton "
        "dimension 1.  Target sizes: [1, 2, 8, 6, 256].  Tensor sizes: [1, 8, 1, 6, 256]",
        cause="Gemma-2-9B (16 query heads, 8 KV heads): n_rep 2 in the KV heads' place",
        source=EXPAND_SRC,
        expect="repeat_kv_swapped",
        says=("expand(B, 8, 2, T, 256)",),
    ),
    dict(
        id="torch-repeat-kv-swapped-no-model",
        model=None,
        text="RuntimeError: The expanded size of the tensor (4) must match the existing size (8) at non-singleton "
        "dimension 1.  Target sizes: [1, 4, 8, 7, 128].  Tensor sizes: [1, 8, 1, 7, 128]",
        cause="as the Llama-3 case: the shapes alone show the swap",
        source=EXPAND_SRC,
        expect="repeat_kv_swapped",
        says=("expand(B, 8, 4, T, 128)",),
    ),
    dict(
        id="torch-cache-write-of-repeated-k",
        model="llama-3-8b",
        text="RuntimeError: The expanded size of the tensor (8) must match the existing size (32) at non-singleton "
        "dimension 1.  Target sizes: [1, 8, 7, 128].  Tensor sizes: [32, 7, 128]",
        cause="k_cache[:, :, start:end] = k with k already repeated to 32 heads: the cache holds 8",
        source=EXPAND_SRC,
        expect="repeated_kv_written",
        says=("repeat_kv belongs to attention",),
    ),
    # --- an index past the end of a pool (f) ----------------------------------------------------------------------
    dict(
        id="torch-pool-slot-one-past-the-end",
        model="llama-3-8b",
        text="IndexError: index 4096 is out of bounds for dimension 0 with size 4096",
        cause="k_pool[slots] = k with a slot equal to the pool's row count",
        source=INDEX_SRC,
        expect="ambiguous",
        says=("slots.max()", "k_pool.shape[0]"),
    ),
    dict(
        id="torch-index-copy-slot-past-the-end",
        model=None,
        text="IndexError: index_copy_(): index 8191 is out of bounds for dimension 0 with size 4096",
        cause="a slot from a page table made for a pool twice this size",
        source=INDEX_COPY_SRC,
        expect="ambiguous",
        says=("slots.max()", "page_size"),
    ),
    dict(
        id="numpy-pool-slot-past-the-end",
        model=None,
        text="IndexError: index 2048 is out of bounds for axis 0 with size 2048",
        cause="a NumPy pool of 2048 rows written at slot 2048",
        source=NUMPY_INDEX_SRC,
        expect="ambiguous",
        says=("slots.max()",),
    ),
    dict(
        id="torch-pool-query-head-as-kv-head",
        model="llama-3-8b",
        text="IndexError: index 8 is out of bounds for dimension 1 with size 8",
        cause="k_pool[slots, h] with h a query head (0..31); the pool holds 8 KV heads",
        source=INDEX_SRC,
        expect="query_head_as_kv_head",
        says=("h // 4",),
    ),
    # --- Phi-3's fused qkv_proj built as MHA (g) ----------------------------------------------------------------
    dict(
        id="hf-phi3-medium-qkv-built-as-mha",
        model=PHI3_MEDIUM,
        text="RuntimeError: Error(s) in loading state_dict for Phi3ForCausalLM:\n\tsize mismatch for "
        "model.layers.0.self_attn.qkv_proj.weight: copying a param with shape torch.Size([7680, 5120]) from "
        "checkpoint, the shape in current model is torch.Size([15360, 5120]).",
        cause="the model was built without num_key_value_heads (MHA: 3 x 5120 rows); the weights are GQA, 10 KV heads",
        source=LOAD_SRC,
        expect="config_without_kv_heads",
        says=("num_key_value_heads = 10", "15360"),
    ),
    dict(
        id="hf-phi4-mini-qkv-built-as-mha",
        model=PHI4_MINI_CONFIG,
        text="size mismatch for model.layers.3.self_attn.qkv_proj.weight: copying a param with shape "
        "torch.Size([5120, 3072]) from checkpoint, the shape in current model is torch.Size([9216, 3072]).",
        cause="Phi-4-mini (24 query heads, 8 KV heads of 128) built as MHA: 3 x 3072 rows",
        source=LOAD_SRC,
        expect="config_without_kv_heads",
        says=("num_key_value_heads = 8",),
    ),
    dict(
        id="mlxlm-phi3-medium-qkv-built-as-mha",
        model=PHI3_MEDIUM,
        text="ValueError: Expected shape (15360, 5120) but received shape (7680, 5120) for parameter "
        "model.layers.0.self_attn.qkv_proj.weight",
        cause="mlx-lm's phi3 built with num_key_value_heads missing from the config it was given",
        source=MLX_SHAPE_SRC,
        expect="config_without_kv_heads",
        says=("num_key_value_heads = 10",),
    ),
    # --- MLX 4-D broadcasts of q's heads against k's (h) ----------------------------------------------------------
    dict(
        id="mlx-4d-broadcast-llama3-cache-write",
        model="llama-3-8b",
        text="ValueError: [broadcast_shapes] Shapes (1,32,7,128) and (1,8,7,128) cannot be broadcast.",
        cause="k repeated to 32 heads before the cache write (keys[..., prev:offset, :] = k), the cache holds 8",
        source="mlx 0.32.4 mlx/ops.cpp (broadcast_shapes); c = mx.zeros((1, 8, 16, 128)); "
        "c[..., 0:7, :] = mx.zeros((1, 32, 7, 128)) (run here)",
        expect="ambiguous",
        says=("before the cache write", "repeat_kv", "print("),
    ),
    dict(
        id="mlx-4d-broadcast-qwen25-decode",
        model="qwen2.5-7b",
        text="ValueError: [broadcast_shapes] Shapes (1,28,1,128) and (1,4,1,128) cannot be broadcast.",
        cause="a decode step: mlx-lm's KVCache.update_and_fetch given k repeated to 28 heads",
        source="mlx 0.32.4 mlx/ops.cpp via mlx-lm 0.32.2 mlx_lm/models/cache.py KVCache.update_and_fetch (run here)",
        expect="ambiguous",
        says=("before the cache write", "missing repeat_kv"),
    ),
    dict(
        id="mlx-4d-broadcast-gemma2-elementwise",
        model="gemma-2-9b",
        text="ValueError: [broadcast_shapes] Shapes (1,16,5,256) and (1,8,5,256) cannot be broadcast.",
        cause="q * k elementwise on 16 against 8 heads (no repeat_kv)",
        source="mlx 0.32.4 mlx/ops.cpp (broadcast_shapes); mx.zeros((1, 16, 5, 256)) * mx.zeros((1, 8, 5, 256)) "
        "(run here)",
        expect="ambiguous",
        says=("repeat_kv", "before the cache write"),
    ),
]


def half(row: dict) -> str:
    """``"tune"`` or ``"held_out"``: the parity of the first byte of SHA-256(row's text)."""
    return "held_out" if hashlib.sha256(row["text"].encode("utf-8")).digest()[0] % 2 else "tune"


TUNE = [row for row in CORPUS if half(row) == "tune"]
HELD_OUT = [row for row in CORPUS if half(row) == "held_out"]
