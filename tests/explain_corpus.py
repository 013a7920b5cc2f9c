"""Real errors engineers paste, with the model, the true cause, where the text comes from, and what
``explain`` must say. ``tests/test_explain_corpus.py`` runs every row.

Each row: ``text`` as printed; ``model`` (a preset, a config dict, or None) and ``numbers`` (what the
user passes as --num-kv-heads, ...); ``cause`` (the true cause); ``source`` (the issue where it was
reported, or the library and version whose code prints it: for those, the message was produced by
running that version here, or its format string is quoted with the numbers of the named case);
``expect`` (the diagnosis's case) and ``says`` (phrases the why or the fix must hold).
"""

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
QWEN3_VL_30B = dict(num_qo_heads=32, num_kv_heads=4, head_dim=128)  # Qwen3-VL-30B-A3B, from transformers #48307

CORPUS = [
    # --- transformers / PyTorch ---------------------------------------------------------------------------
    dict(
        id="hf-view-k-with-query-heads",
        model="llama-3-8b",
        text="RuntimeError: shape '[1, 7, 32, 128]' is invalid for input of size 7168",
        cause="k_proj's output (8 KV heads x 128) viewed with num_attention_heads (32) in a hand-written attention",
        source="PyTorch aten/src/ATen/InferSize.h infer_size_impl at pytorch/pytorch@b84d4e31c72c: "
        'ss << "shape \'" << shape << "\' is invalid for input of size " << numel',
        expect="kv_viewed_with_hq",
        says=("num_key_value_heads", "k.view(B, T, 8, 128)"),
    ),
    dict(
        id="hf-tp8-over-4-kv-heads",
        model=None,
        numbers=QWEN3_VL_30B,
        text="RuntimeError: shape '[4, 178, -1, 128]' is invalid for input of size 45568",
        cause="native TP with tp_size=8 over 4 KV heads: 64 features of k_proj per rank, half a head",
        source="https://github.com/huggingface/transformers/issues/48307",
        expect="tp_over_kv_heads",
        says=("tp = 8", "tp <= 4"),
    ),
    dict(
        id="hf-gpt-neox-heads-do-not-divide",
        model={"model_type": "gpt_neox", "hidden_size": 1024, "num_attention_heads": 12},
        text="RuntimeError: shape '[1, 5, 12, 255]' is invalid for input of size 15360",
        cause="hidden_size 1024 is not a multiple of 12 heads: head_size = 1024 // 12 = 85 (Isotonic/gpt_neox_225M)",
        source="https://github.com/huggingface/transformers/issues/23081",
        expect="heads_do_not_divide_hidden",
        says=("not a multiple of num_attention_heads = 12",),
    ),
    dict(
        id="based-k-projected-with-query-heads",
        model=None,
        numbers=dict(num_qo_heads=8, num_kv_heads=4, head_dim=16),
        text="RuntimeError: shape '[1, 1024, 4, 16]' is invalid for input of size 131072",
        cause="the feature-map k projection was built with num_heads (8) and viewed with num_key_value_heads (4)",
        source="https://github.com/HazyResearch/zoology/issues/20",
        expect="ambiguous",
        says=("k/v were projected with num_attention_heads", "q (Hq x D"),
    ),
    dict(
        id="hf-attention-without-repeat-kv",
        model="llama-3-8b",
        text="RuntimeError: The size of tensor a (32) must match the size of tensor b (8) at non-singleton dimension 1",
        cause="eager attention on GQA tensors without repeat_kv: q has 32 heads, k 8",
        source='PyTorch aten/src/ATen/ExpandUtils.cpp infer_size_impl at pytorch/pytorch@181624244c76: "The size of tensor a (", sizeA, ") must match the size of '
        'tensor b (", sizeB, ") at non-singleton dimension ", i',
        expect="missing_repeat_kv",
        says=("repeat_kv(k, 4)", "enable_gqa=True"),
    ),
    dict(
        id="hf-attention-without-repeat-kv-no-model",
        model=None,
        text="RuntimeError: The size of tensor a (32) must match the size of tensor b (8) at non-singleton dimension 1",
        cause="as above, pasted without the model",
        source="PyTorch aten/src/ATen/ExpandUtils.cpp at pytorch/pytorch@181624244c76 (format as above)",
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
        source="https://github.com/vllm-project/vllm-ascend/pull/6581",
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
        source="PyTorch torch/nn/modules/module.py _load_from_state_dict at pytorch/pytorch@d4cc86dc3cf9: 'size mismatch for {}: copying a param with "
        "shape {} from checkpoint, the shape in current model is {}.'",
        expect="config_without_kv_heads",
        says=("num_key_value_heads = 8",),
    ),
    dict(
        id="hf-qwen3-head-dim-from-hidden",
        model=QWEN3_32B,
        text="size mismatch for model.layers.0.self_attn.q_proj.weight: copying a param with shape "
        "torch.Size([8192, 5120]) from checkpoint, the shape in current model is torch.Size([5120, 5120]).",
        cause="custom modeling code took head_dim = 5120 // 64 = 80; Qwen3-32B sets head_dim = 128",
        source="PyTorch module.py load_state_dict format (pytorch/pytorch@d4cc86dc3cf9); the mistake of TensorRT-LLM #5912",
        expect="head_dim_from_hidden",
        says=("5120 // 64 = 80", "head_dim = 128"),
    ),
    dict(
        id="trtllm-qwen3-qkv-head-dim",
        model=QWEN3_32B,
        text="Error: `Parameter transformer.layers.0.attention.qkv.weight has invalid shape torch.Size([10240, 5120]) "
        "compared with expected shape (6400, 5120)`",
        cause="TensorRT-LLM's Qwen config computed head_dim = hidden_size // num_attention_heads = 80, not 128",
        source="https://github.com/NVIDIA/TensorRT-LLM/issues/5912",
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
        source="https://github.com/foundation-model-stack/foundation-model-stack/issues/384",
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
        source="https://github.com/StartHua/Comfyui_CXH_joy_caption/issues/35",
        expect="library_older_than_config",
        says=("Upgrade transformers",),
    ),
    dict(
        id="vllm-worker-two-fields",
        model=None,
        text="ValueError: rope_scaling must be a dictionary with two fields, type and factor",
        cause="vLLM's image pinned a transformers older than its Llama 3.1 config",
        source="https://github.com/runpod-workers/worker-vllm/issues/89",
        expect="library_older_than_config",
        says=("Upgrade transformers",),
    ),
    dict(
        id="hf5-llama3-fields-missing",
        model="llama-3.1-8b",
        text="KeyError: \"Missing required keys in `rope_parameters` for 'rope_type'='llama3': {'high_freq_factor', "
        "'low_freq_factor'}\"",
        cause="a llama3 rope_scaling trimmed to {rope_type, factor}",
        source="transformers 5.25.0, LlamaConfig(rope_scaling={'rope_type': 'llama3', 'factor': 8.0}) (run here)",
        expect="scaling_fields_missing",
        says=("high_freq_factor = 4.0", "low_freq_factor = 1.0"),
    ),
    dict(
        id="hf5-yarn-factor-missing",
        model="qwen2.5-7b-yarn",
        text="KeyError: \"Missing required keys in `rope_parameters` for 'rope_type'='yarn': {'factor'}\"",
        cause="a yarn rope_scaling without its factor",
        source="transformers 5.25.0, LlamaConfig(rope_scaling={'rope_type': 'yarn', "
        "'original_max_position_embeddings': 32768}) (run here)",
        expect="scaling_fields_missing",
        says=("factor = 4.0",),
    ),
    dict(
        id="hf5-rope-theta-attribute",
        model="qwen2.5-7b",
        text="AttributeError: 'Qwen2Config' object has no attribute 'rope_theta'",
        cause="code written for transformers 4 reading config.rope_theta under transformers 5",
        source="transformers 5.25.0, Qwen2Config().rope_theta (run here); https://github.com/deepspeedai/DeepSpeed/pull/8345",
        expect="ambiguous",
        says=("rope_parameters", "1e+06", "transformers.__version__"),
    ),
    dict(
        id="deepspeed-rope-theta-transformers5",
        model=None,
        text="current code -> AttributeError: 'LlamaConfig' object has no attribute 'rope_theta'",
        cause="DeepSpeed's Llama policy reading config.rope_theta on transformers 5.8",
        source="https://github.com/deepspeedai/DeepSpeed/pull/8341",
        expect="ambiguous",
        says=("transformers 5 keeps it in config.rope_parameters",),
    ),
    dict(
        id="pia-rope-theta-old-transformers",
        model=None,
        text="AttributeError: 'LlamaConfig' object has no attribute 'rope_theta'",
        cause="a transformers from before LlamaConfig had rope_theta (Llama-2 example, 2024-02)",
        source="https://github.com/alipay/PainlessInferenceAcceleration/issues/16",
        expect="ambiguous",
        says=("from before LlamaConfig had rope_theta",),
    ),
    dict(
        id="vllm-055-keyerror-type",
        model="llama-3.1-8b",
        text='llama3.1 70B load error: if rope_scaling is not None and rope_scaling["type"] != "su": '
        "KeyError: 'type'",
        cause="vLLM 0.5.5 code reading rope_scaling['type'] of a Llama 3.1 config that has rope_type",
        source="https://github.com/vllm-project/vllm/issues/9481",
        expect="layout_skew",
        says=("'rope_type'", 'add "type"'),
    ),
    dict(
        id="kblam-keyerror-type",
        model=None,
        text='  File "/home/fokus/Thomas/KBLaM/src/kblam/models/llama3_model.py", line 128, in _init_rope\n'
        '    scaling_type = self.config.rope_scaling["type"]\n'
        "                   ~~~~~~~~~~~~~~~~~~~~~~~~^^^^^^^^\nKeyError: 'type'",
        cause="custom Llama code reading rope_scaling['type'] of a config that spells it rope_type",
        source="https://github.com/microsoft/KBLaM/issues/37",
        expect="layout_skew",
        says=("older than the config",),
    ),
    dict(
        id="tgi-keyerror-rope-type",
        model=None,
        text="KeyError: 'rope_type'",
        cause="text-generation-inference reading rope_type from a config that spells it 'type' (per the maintainer)",
        source="https://github.com/huggingface/transformers/issues/32167",
        expect="layout_skew",
        says=('Add "rope_type"',),
    ),
    dict(
        id="minicpm-sglang-keyerror-rope-type",
        model=None,
        text='[Bug]: 执行sglang.launch_server 出现KeyError "rope_type"',
        cause="an SGLang older than the model's config (the maintainers: upgrade SGLang)",
        source="https://github.com/OpenBMB/MiniCPM/issues/269",
        expect="layout_skew",
        says=("upgrade sglang",),
    ),
    dict(
        id="hf-unrecognized-type-warning",
        model=None,
        text="Unrecognized keys in `rope_scaling` for 'rope_type'='linear': {'type'}",
        cause="a config holding both 'type' and 'rope_type': a warning, the scaling is read correctly",
        source="https://github.com/vllm-project/vllm/issues/6897",
        expect="harmless_warning",
        says=("Nothing to fix",),
    ),
    # --- MLX / mlx-lm --------------------------------------------------------------------------------------
    dict(
        id="mlx-reshape-k-with-query-heads",
        model="llama-3-8b",
        text="ValueError: [reshape] Cannot reshape array of size 7168 into shape (1,7,32,128).",
        cause="k of 8 KV heads reshaped with 32 heads",
        source="mlx 0.32.4, mx.zeros((1, 7, 1024)).reshape(1, 7, 32, 128) (run here)",
        expect="kv_viewed_with_hq",
        says=("num_key_value_heads",),
    ),
    dict(
        id="mlx-reshape-q-with-kv-heads",
        model="qwen2.5-7b",
        text="ValueError: [reshape] Cannot reshape array of size 17920 into shape (1,5,4,128).",
        cause="Qwen2.5-7B's q (28 heads) reshaped with its 4 KV heads",
        source="mlx 0.32.4, mx.zeros((1, 5, 3584)).reshape(1, 5, 4, 128) (run here)",
        expect="ambiguous",
        says=("view q with num_attention_heads",),
    ),
    dict(
        id="mlx-reshape-gemma2-head-dim",
        model="gemma-2-9b",
        text="ValueError: [reshape] Cannot reshape array of size 12288 into shape (1,6,8,224).",
        cause="Gemma-2-9B's head_dim taken as 3584 // 16 = 224; the config sets 256",
        source="mlx 0.32.4, mx.zeros((1, 6, 2048)).reshape(1, 6, 8, 224) (run here)",
        expect="head_dim_from_hidden",
        says=("3584 // 16 = 224", "256"),
    ),
    dict(
        id="mlx-matmul-without-repeat-kv",
        model="llama-3-8b",
        text="ValueError: [broadcast_shapes] Shapes (1,32) and (1,8) cannot be broadcast.",
        cause="q @ k.T with q of 32 heads and k of 8 (no repeat, or a hand-written attention)",
        source="mlx 0.32.4, mx.zeros((1, 32, 7, 128)) @ mx.zeros((1, 8, 128, 7)) (run here)",
        expect="missing_repeat_kv",
        says=("mx.fast.scaled_dot_product_attention",),
    ),
    dict(
        id="mlx-phi2-cos-of-rotary-dim",
        model="phi-2",
        text="ValueError: [broadcast_shapes] Shapes (1,32,7,80) and (7,32) cannot be broadcast.",
        cause="Phi-2 rotates 32 of 80 dimensions; cos of 32 multiplied into the whole head",
        source="mlx 0.32.4, mx.zeros((1, 32, 7, 80)) * mx.zeros((7, 32)) (run here)",
        expect="rotary_dim",
        says=("q[..., :32]",),
    ),
    dict(
        id="mlx-sdpa-k-not-transposed-qwen",
        model="qwen2.5-7b",
        text="ValueError: [scaled_dot_product_attention] n_heads must be a multiple of n_kv_heads, found n_heads 28 "
        "for n_kv_heads 6.",
        cause="k passed as [B, T, H, D] (6 tokens on the head axis)",
        source="mlx 0.32.4, mx.fast.scaled_dot_product_attention(q [1,28,6,128], k [1,6,4,128], ...) (run here)",
        expect="foreign_k",
        says=("transpose(0, 2, 1, 3)",),
    ),
    dict(
        id="mlx-sdpa-keys-values-differ",
        model="llama-3-8b",
        text="ValueError: [scaled_dot_product_attention] keys, values expected to have matching n_kv_heads; found "
        "keys with n_heads 7 for values with n_heads 8.",
        cause="k left as [B, T, H, D], v transposed",
        source="mlx 0.32.4, mx.fast.scaled_dot_product_attention(q, k [1,7,8,128], v [1,8,7,128]) (run here)",
        expect="k_layout",
        says=("transpose(0, 2, 1, 3)",),
    ),
    dict(
        id="mlx-rope-on-224-wide-heads",
        model="gemma-2-9b",
        text="ValueError: [rope] dims must not exceed the input's last dimension (224) but got 256.",
        cause="Gemma-2's k viewed with 224 (hidden_size // heads), rope dims from config.head_dim 256",
        source="mlx 0.32.4, mx.fast.rope(mx.zeros((1, 8, 6, 224)), 256, ...) (run here)",
        expect="head_dim_from_hidden",
        says=("3584 // 16 = 224",),
    ),
    dict(
        id="mlxlm-config-without-kv-heads",
        model="llama-3-8b",
        text="ValueError: Expected shape (4096, 4096) but received shape (1024, 4096) for parameter "
        "model.layers.0.self_attn.k_proj.weight",
        cause="config.json without num_key_value_heads (mlx-lm defaults it to num_attention_heads)",
        source="mlx 0.32.4 nn.Module.load_weights via an mlx-lm 0.32.2 llama.Attention(num_key_value_heads=None) "
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
        source="mlx 0.32.4 load_weights via mlx-lm 0.32.2 llama.Attention(num_key_value_heads=8) (run here)",
        expect="weights_of_another_model",
        says=("32 KV heads", "config.json that ships with these weights"),
    ),
    dict(
        id="mlxlm-gemma-q-proj-head-dim",
        model="gemma-2-9b",
        text="ValueError: Expected shape (3584, 3584) but received shape (4096, 3584) for parameter "
        "model.layers.0.self_attn.q_proj.weight",
        cause="a config without head_dim for Gemma-2 weights (q_proj is 16 x 256 = 4096 rows)",
        source="mlx 0.32.4 load_weights via mlx-lm 0.32.2 llama.Attention(hidden 3584, 16 heads) (run here)",
        expect="head_dim_from_hidden",
        says=("3584 // 16 = 224", "head_dim = 256"),
    ),
    dict(
        id="mlx-examples-909",
        model="llama-3.1-8b",
        text="ValueError: rope_scaling must contain keys {'type', 'factor'}",
        cause="mlx-lm before Llama 3.1 support reading a rope_type config",
        source="https://github.com/ml-explore/mlx-examples/issues/909",
        expect="layout_skew",
        says=("pip install -U mlx-lm",),
    ),
    dict(
        id="transformerlab-152",
        model=None,
        text="ValueError: rope_scaling must contain keys {'factor', 'type'}",
        cause="Llama 3.2 with an old mlx-examples lora script",
        source="https://github.com/transformerlab/transformerlab-app/issues/152",
        expect="layout_skew",
        says=("Upgrade mlx-lm",),
    ),
    dict(
        id="mlxlm-phi3-longrope-rope-type",
        model="phi-3.5-mini",
        text="ValueError: rope_scaling must contain keys {'long_factor', 'type'}",
        cause="a Phi-3.5 config saved with rope_type (no 'type'); mlx-lm's phi3.py reads 'type'",
        source="mlx-lm 0.32.2, phi3.ModelArgs(rope_scaling={'rope_type': 'longrope', ...}) (run here)",
        expect="layout_skew",
        says=('add "type"',),
    ),
    dict(
        id="mlx-examples-1329",
        model=None,
        text="Error: rope_scaling 'type' currently only supports 'linear'",
        cause="a Qwen2.5-Coder yarn config with an mlx-lm whose qwen2 computed only linear scaling",
        source="https://github.com/ml-explore/mlx-examples/issues/1329",
        expect="library_older_than_config",
        says=("Upgrade mlx-lm",),
    ),
    # --- vLLM / llama.cpp ----------------------------------------------------------------------------------
    dict(
        id="vllm-414-52-heads-tp3",
        model=None,
        text="ValueError: Total number of attention heads (52) must be divisible by tensor parallel size (3).",
        cause="LLaMA-33B (52 heads) on 3 GPUs",
        source="https://github.com/vllm-project/vllm/issues/414",
        expect="tp_does_not_divide_heads",
        says=("[1, 2, 4, 13, 26, 52]",),
    ),
    dict(
        id="adaptthink-28-heads-tp8",
        model="qwen2.5-7b",
        text="ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8)",
        cause="DeepSeek-R1-Distill-Qwen-7B (Qwen2.5-7B's shapes) with tp 8",
        source="https://github.com/THU-KEG/AdaptThink/issues/1",
        expect="tp_does_not_divide_heads",
        says=("[1, 2, 4, 7, 14, 28]", "[1, 2, 4, 28]"),
    ),
    dict(
        id="vllm-1705-gpt2-xl",
        model=None,
        text="ValueError: Total number of attention heads (25) must be divisible by tensor parallel size (2).",
        cause="gpt2-xl (25 heads) on 2 GPUs",
        source="https://github.com/vllm-project/vllm/issues/1705",
        expect="tp_does_not_divide_heads",
        says=("[1, 5, 25]",),
    ),
    dict(
        id="worker-vllm-257-rope-type-key",
        model=None,
        text="  Value error, rope_scaling should have a 'rope_type' key [type=value_error, input_value=ArgsKwargs((), "
        "{'model': ...rocessor_plugin': None}), input_type=ArgsKwargs]",
        cause="rope_scaling handed to vLLM as a string from an environment variable",
        source="https://github.com/runpod-workers/worker-vllm/issues/257",
        expect="ambiguous",
        says=("as a string",),
    ),
    dict(
        id="koboldcpp-419-no-gqa-loader",
        model="llama-3-70b",
        text="error loading model: llama.cpp: tensor 'blk.0.attn_k.weight' has wrong shape; expected  8192,  8192, "
        "got  8192,  1024,     1,     1",
        cause="a loader without GQA support (koboldcpp 1.4.2) assumed as many KV heads as query heads for a 70B",
        source="https://github.com/LostRuins/koboldcpp/issues/419 (tensor sizes from its log; llama.cpp's "
        'check_tensor_dims format "%s: tensor \'%s\' has wrong shape; expected %s, got %s", "%5" per size)',
        expect="config_without_kv_heads",
        says=("head_count_kv",),
    ),
    dict(
        id="llamacpp-mha-tensors-gqa-metadata",
        model="llama-3-8b",
        text="llama_model_load: error loading model: check_tensor_dims: tensor 'blk.0.attn_k.weight' has wrong "
        "shape; expected  4096,  1024, got  4096,  4096,     1,     1",
        cause="a GGUF whose metadata says 8 KV heads holding MHA-sized k tensors (weights of another model)",
        source="llama.cpp src/llama-model-loader.cpp check_tensor_dims (format above)",
        expect="weights_of_another_model",
        says=("32 KV heads",),
    ),
    # --- SGLang's and ropepool's own --------------------------------------------------------------------------
    dict(
        id="readme-classic-bug",
        model="llama-3-8b",
        text="k shape must be [num_tokens, num_kv_heads, head_dim], got (4, 8, 128)\n  expected (4, 32, 128) = "
        "[T, Hkv, D], got (4, 8, 128).",
        cause="num_kv_heads passed as num_attention_heads (notebook 01)",
        source="ropepool 0.1.0 rope_pool_fused, this repository (SGLang's message, ropepool's second line)",
        expect="num_kv_heads",
        says=("classic GQA bug", "Pass num_kv_heads=8"),
    ),
    dict(
        id="seed-qwen-k-of-32-heads",
        model="qwen2.5-7b",
        text="k shape must be [num_tokens, num_kv_heads, head_dim], got (6, 32, 128)",
        cause="k built with Llama-3-8B's config",
        source="SGLang's rope_pool_fused wrapper (the seed's error)",
        expect="foreign_k",
        says=("llama-3-8b", "[T, 4, 128]"),
    ),
    dict(
        id="gemma2-head-dim-passed-224",
        model="gemma-2-9b",
        text="q shape must be [num_tokens, num_qo_heads, head_dim], got (4, 16, 256)\n  expected (4, 16, 224) = "
        "[T, Hq, D], got (4, 16, 256).",
        cause="head_dim passed as hidden_size // num_attention_heads",
        source="ropepool 0.1.0 rope_pool_fused, this repository (the probe's Gemma-2 case)",
        expect="head_dim_from_hidden",
        says=("Pass head_dim=256",),
    ),
    dict(
        id="k-one-token-longer-with-count",
        model="llama-3-8b",
        numbers=dict(passed_kv_heads=8),
        text="RuntimeError: k shape must be [num_tokens, num_kv_heads, head_dim], got (5, 8, 128)",
        cause="k gathered from 5 tokens, q from 4",
        source="SGLang's rope_pool_fused wrapper (the probe's k-one-token-longer case)",
        expect="tokens",
        says=("same tokens",),
    ),
    dict(
        id="tp-split-k-zero-heads",
        model="qwen2.5-7b",
        text="k shape must be [num_tokens, num_kv_heads, head_dim], got (6, 0, 128)",
        cause="tp = 8 over 4 KV heads gave a rank no KV head",
        source="ropepool 0.1.0 rope_pool_fused, this repository (a ZeroDivisionError found in its own validation)",
        expect="zero_heads",
        says=("tp <= Hkv",),
    ),
]
