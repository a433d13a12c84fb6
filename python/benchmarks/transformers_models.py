"""Hugging Face models on gemm_dsl, against the same models on torch.

Builds models from configs with random weights (no download; fewer layers than the real ones,
the same layer shapes): a Llama-3-8B-shaped dense model, whose every ``nn.Linear`` is patched
to ``gemm_dsl.matmul`` (bias fused where there is one), and a Mixtral-8x7B-shaped one, whose
experts' grouped products (transformers' ``grouped_mm`` experts, ``torch.nn.functional.
grouped_mm`` by default) are patched to ``gemm_dsl.grouped_mm`` and its linear layers to
``gemm_dsl.matmul``. For each: the logits of a 2048-token prompt compared with the unpatched
model's, both prefills timed (CUDA events, median), and for the dense model a few greedy
decode steps, eager and (with a static cache) replayed from a CUDA graph of one step. On a
GPU machine with torch and transformers:

    python python/benchmarks/transformers_models.py --layers 8 --out models.md
"""

import argparse
import inspect
import statistics

import torch
import transformers

import gemm_dsl
from timing import publish


def llama_8b_config(layers):
    return transformers.LlamaConfig(
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=layers,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=128256,
        max_position_embeddings=8192,
        rope_theta=500000.0,
    )


# gemm_dsl.matmul calls made by the patched layers: proof that the model ran on them.
CALLS = [0]


def patch_linears(model):
    """Every nn.Linear computes x @ W.T (+ bias) with gemm_dsl.matmul; returns how many."""
    count = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):

            def forward(x, module=module):
                CALLS[0] += 1
                return gemm_dsl.matmul(x, module.weight.t(), bias=module.bias)

            module.forward = forward
            count += 1
    return count


# gemm_dsl.grouped_mm calls made by the patched experts.
GROUPED_CALLS = [0]


def mixtral_config(layers):
    return transformers.MixtralConfig(
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=layers,
        num_attention_heads=32,
        num_key_value_heads=8,
        num_local_experts=8,
        num_experts_per_tok=2,
        vocab_size=32000,
        max_position_embeddings=8192,
        experts_implementation="grouped_mm",
    )


def patch_experts():
    """transformers' grouped experts call gemm_dsl.grouped_mm instead of torch's."""
    from transformers.integrations import moe

    def grouped(input, weight, offs):
        GROUPED_CALLS[0] += 1
        return gemm_dsl.grouped_mm(input.to(weight.dtype), weight, offs)

    moe._grouped_mm = grouped


def time_ms(fn, repeats=7):
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def decode_tokens_per_s(model, prompt, steps):
    """Greedy decode of `steps` tokens after the prompt with the model's dynamic cache, eager:
    `generate` of `steps + 1` tokens less `generate` of one (the prefill and the first token),
    each the median of five runs."""

    def generate(tokens):
        def run():
            with torch.no_grad():
                model.generate(prompt, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)

        return run

    first = time_ms(generate(1), repeats=5)
    total = time_ms(generate(steps + 1), repeats=5)
    return steps / ((total - first) / 1e3)


def static_cache(model, length):
    """transformers' StaticCache of `length` positions (its constructor's arguments differ
    between releases: those it names are given)."""
    names = inspect.signature(transformers.StaticCache.__init__).parameters
    given = {"config": model.config, "max_cache_len": length, "max_batch_size": 1, "device": "cuda", "dtype": torch.bfloat16}
    return transformers.StaticCache(**{name: value for name, value in given.items() if name in names})


def graph_decode(model, prompt, steps):
    """Greedy decode of `steps` tokens after the prompt, one step captured in a CUDA graph
    (static cache, static token and position tensors) and replayed per token, as serving
    engines run decode: (tokens/s of the timed replays, their tokens). Two rounds of `steps`
    replays (a warm-up, then the timed one) follow one eager step; each replay writes the
    next position of the cache (transformers' static cache counts them on the device too)."""
    length = prompt.shape[1]
    with torch.no_grad():
        cache = static_cache(model, length + 1 + 2 * steps + 4)
        logits = model(prompt, past_key_values=cache, cache_position=torch.arange(length, device="cuda")).logits
        token = logits[:, -1:].argmax(-1)
        position = torch.tensor([length], device="cuda")

        def step():
            return model(token, past_key_values=cache, cache_position=position).logits[:, -1:].argmax(-1)

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            token.copy_(step())  # loads every kernel outside the capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            next_token = step()
        next_position = [length + 1]

        def run():
            tokens = []
            for _ in range(steps):
                position.fill_(next_position[0])
                next_position[0] += 1
                graph.replay()
                token.copy_(next_token)
                tokens.append(next_token.clone())
            return tokens

        run()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        tokens = run()
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1e3
        del graph
    return steps / seconds, torch.cat(tokens, dim=-1)


def compare_prefill(model, prompt, patch):
    """(logit error, argmax agreement, torch ms, gemm_dsl ms, (matmul calls, grouped calls) in
    one patched prefill) of one prefill, the model patched by `patch` between the two runs."""
    with torch.no_grad():
        reference = model(prompt).logits.float()
        torch_ms = time_ms(lambda: model(prompt))
    patch(model)
    CALLS[0] = GROUPED_CALLS[0] = 0
    with torch.no_grad():
        logits = model(prompt).logits.float()
        calls = (CALLS[0], GROUPED_CALLS[0])
        ours_ms = time_ms(lambda: model(prompt))
    error = (logits - reference).abs().max().item() / reference.abs().max().item()
    agree = (logits.argmax(-1) == reference.argmax(-1)).float().mean().item()
    return error, agree, torch_ms, ours_ms, calls


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--moe-layers", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--decode", type=int, default=32)
    parser.add_argument("--out")
    args = parser.parse_args()
    torch.manual_seed(0)
    lines = [
        f"# Hugging Face models on gemm_dsl, {torch.cuda.get_device_name()}",
        "",
        f"torch {torch.__version__}, transformers {transformers.__version__}, gemm_dsl {gemm_dsl.__version__}; "
        f"random weights, bf16, a prompt of 1x{args.tokens} tokens.",
        "",
        "| model | patched | logits max abs diff / max abs | same argmax | torch | gemm_dsl | ratio |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]

    config = llama_8b_config(args.layers)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(config).to(torch.bfloat16).eval()
    prompt = torch.randint(0, config.vocab_size, (1, args.tokens), device="cuda")
    torch_decode = decode_tokens_per_s(model, prompt[:, :128], args.decode)
    torch_graph_decode, torch_tokens = graph_decode(model, prompt[:, :128], args.decode)
    patched = []
    error, agree, torch_ms, ours_ms, (calls, _) = compare_prefill(
        model, prompt, lambda m: patched.append(patch_linears(m))
    )
    ours_decode = decode_tokens_per_s(model, prompt[:, :128], args.decode)
    ours_graph_decode, ours_tokens = graph_decode(model, prompt[:, :128], args.decode)
    same_tokens = (ours_tokens == torch_tokens).float().mean().item()
    name = f"Llama-3-8B shape, {args.layers} layers"
    lines.append(
        f"| {name} | {patched[0]} nn.Linear ({calls} calls a prefill) | {error:.2e} | {agree * 100:.1f}% "
        f"| {args.tokens / torch_ms * 1e3:.0f} tok/s | {args.tokens / ours_ms * 1e3:.0f} tok/s | {torch_ms / ours_ms:.3f} |"
    )
    lines.append(
        f"| {name}, greedy decode ({args.decode} steps after 128, eager) | | | | {torch_decode:.1f} tok/s "
        f"| {ours_decode:.1f} tok/s | {ours_decode / torch_decode:.3f} |"
    )
    lines.append(
        f"| {name}, greedy decode ({args.decode} steps after 128, static cache, each step a CUDA graph replay) "
        f"| | | {same_tokens * 100:.1f}% of tokens | {torch_graph_decode:.1f} tok/s "
        f"| {ours_graph_decode:.1f} tok/s | {ours_graph_decode / torch_graph_decode:.3f} |"
    )
    del model
    torch.cuda.empty_cache()

    config = mixtral_config(args.moe_layers)
    with torch.device("cuda"):
        model = transformers.MixtralForCausalLM(config).to(torch.bfloat16).eval()
    prompt = torch.randint(0, config.vocab_size, (1, args.tokens), device="cuda")

    def patch_moe(model):
        patch_experts()
        patched.append(patch_linears(model))

    # The routing is discrete: a last-bit difference in a router's logits sends a token to
    # another expert. torch's own two expert paths (grouped products, and a loop over the
    # experts) measure how far two correct bf16 runs of this model drift apart.
    with torch.no_grad():
        grouped_logits = model(prompt).logits.float()
        model.set_experts_implementation("eager")
        loop_logits = model(prompt).logits.float()
        model.set_experts_implementation("grouped_mm")
    floor = (loop_logits - grouped_logits).abs().max().item() / grouped_logits.abs().max().item()
    floor_agree = (loop_logits.argmax(-1) == grouped_logits.argmax(-1)).float().mean().item()
    del grouped_logits, loop_logits
    lines.append(
        f"| Mixtral-8x7B shape, {args.moe_layers} layers: torch's eager experts (a loop) against its grouped_mm "
        f"(the noise floor) | | {floor:.2e} | {floor_agree * 100:.1f}% | | | |"
    )
    error, agree, torch_ms, ours_ms, (calls, grouped_calls) = compare_prefill(model, prompt, patch_moe)
    lines.append(
        f"| Mixtral-8x7B shape, {args.moe_layers} layers | experts ({grouped_calls} grouped calls) and "
        f"{patched[1]} nn.Linear ({calls} calls) | {error:.2e} | {agree * 100:.1f}% "
        f"| {args.tokens / torch_ms * 1e3:.0f} tok/s | {args.tokens / ours_ms * 1e3:.0f} tok/s | {torch_ms / ours_ms:.3f} |"
    )
    publish(lines, args.out)


if __name__ == "__main__":
    main()
