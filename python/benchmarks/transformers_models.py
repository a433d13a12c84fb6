"""Hugging Face models on gemm_dsl, against the same models on torch.

Builds models from configs with random weights (no download; fewer layers than the real ones,
the same layer shapes): a Llama-3-8B-shaped dense model, whose every ``nn.Linear`` is patched
to ``gemm_dsl.matmul`` (bias fused where there is one), and a Mixtral-8x7B-shaped one, whose
experts' grouped products (transformers' ``grouped_mm`` experts, ``torch.nn.functional.
grouped_mm`` by default) are patched to ``gemm_dsl.grouped_mm`` and its linear layers to
``gemm_dsl.matmul``. For each: the logits of a 2048-token prompt compared with the unpatched
model's, both prefills timed in turns (CUDA events, median), and a few greedy decode steps,
eager and (with a static cache) replayed from a CUDA graph of one step; with ``--profile``,
where each prefill's GPU time goes. On a GPU machine with torch and transformers:

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
    """Every nn.Linear computes x @ W.T (+ bias) with gemm_dsl.matmul: (how many, a function
    that gives them back their own forward)."""
    linears = [module for module in model.modules() if isinstance(module, torch.nn.Linear)]
    # A module's own forward (a hook's wrapper, say), put back by the undo; None: the class's.
    own = [module.__dict__.get("forward") for module in linears]
    for module in linears:

        def forward(x, module=module):
            CALLS[0] += 1
            return gemm_dsl.matmul(x, module.weight.t(), bias=module.bias)

        module.forward = forward

    def undo():
        for module, forward in zip(linears, own):
            if forward is None:
                del module.forward
            else:
                module.forward = forward

    return len(linears), undo


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
    """transformers' grouped experts call gemm_dsl.grouped_mm instead of torch's: a function
    that gives them back torch's."""
    from transformers.integrations import moe

    def grouped(input, weight, offs):
        GROUPED_CALLS[0] += 1
        return gemm_dsl.grouped_mm(input.to(weight.dtype), weight, offs)

    own = moe._grouped_mm
    moe._grouped_mm = grouped

    def undo():
        moe._grouped_mm = own

    return undo


def time_in_turns(fn, patch, repeats=9):
    """Median ms of one call of `fn` unpatched and patched (by `patch`, which returns its
    undo), taken in turns, so that both see the same clocks and heat: the GPU's speed drifts
    by a few percent over a minute of prefills. The model is left patched."""
    samples = ([], [])
    undo = None
    for _ in range(repeats):
        for patched in (False, True):
            if patched:
                undo = patch()
            elif undo is not None:
                undo()
            fn()  # a warm-up, each turn: the other one ran last
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples[patched].append(start.elapsed_time(end))
    return statistics.median(samples[0]), statistics.median(samples[1])


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


def graph_decode(model, prompt, steps, capture=True):
    """Greedy decode of `steps` tokens after the prompt, one step captured in a CUDA graph
    (static cache, static token and position tensors) and replayed per token, as serving
    engines run decode: (tokens/s of the timed replays, every replay's token). Two rounds of
    `steps` replays (a warm-up, then the timed one) follow one eager step; each replay writes
    the next position of the cache (transformers' static cache counts them on the device
    too). With `capture` false the same steps run eagerly: the replays' reference tokens."""
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
        graph = None
        if capture:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                next_token = step()
            advance = graph.replay
        else:
            next_token = torch.empty_like(token)

            def advance():
                next_token.copy_(step())

        next_position = [length + 1]

        def run():
            tokens = []
            for _ in range(steps):
                position.fill_(next_position[0])
                next_position[0] += 1
                advance()
                token.copy_(next_token)
                tokens.append(next_token.clone())
            return tokens

        warm_up = run()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        tokens = run()
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1e3
        del graph
    return steps / seconds, torch.cat(warm_up + tokens, dim=-1)


def kernel_profile(model, prompt, top=12):
    """Where one prefill's GPU time goes: (wall ms, summed kernel ms, the `top` kernels by
    their summed time as (name, calls, ms)). The wall time is taken with the profiler on, its
    own cost included: only the kernels' times compare with another run's."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        model(prompt)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as trace:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(prompt)
            end.record()
            end.synchronize()
    kernels = {}
    for event in trace.events():
        if event.device_type == torch.autograd.DeviceType.CUDA and event.device_time > 0:
            calls, us = kernels.get(event.name, (0, 0.0))
            kernels[event.name] = (calls + 1, us + event.device_time)
    ranked = sorted(kernels.items(), key=lambda item: -item[1][1])
    rows = [(name, calls, us / 1e3) for name, (calls, us) in ranked[:top]]
    return start.elapsed_time(end), sum(us for _, us in kernels.values()) / 1e3, rows


def profile_lines(title, profile):
    wall, busy, rows = profile
    lines = [f"### {title}: {wall:.2f} ms wall, {busy:.2f} ms in kernels", "", "| kernel | calls | ms |", "|---|---:|---:|"]
    lines += [f"| `{name[:90]}` | {calls} | {ms:.3f} |" for name, calls, ms in rows]
    return lines + [""]


def decode_speeds(model, prompt, steps):
    """(eager tokens/s, CUDA-graph tokens/s, the graph decode's tokens, the share of them the
    same steps give run eagerly) of `steps` greedy decode steps after the prompt's first 128
    tokens."""
    eager = decode_tokens_per_s(model, prompt[:, :128], steps)
    try:
        speed, tokens = graph_decode(model, prompt[:, :128], steps)
    except RuntimeError as error:  # a model whose step cannot be captured: said in the table
        print(f"CUDA-graph decode failed (later runs on this stream may fail too): {error}")
        torch.cuda.synchronize()
        return eager, float("nan"), None, float("nan")
    _, reference = graph_decode(model, prompt[:, :128], steps, capture=False)
    return eager, speed, tokens, (tokens == reference).float().mean().item()


def decode_lines(name, steps, torch_speeds, ours_speeds):
    """The two decode rows of the table (eager, CUDA graph) for one model."""
    same_tokens = float("nan")
    if ours_speeds[2] is not None and torch_speeds[2] is not None:
        same_tokens = (ours_speeds[2] == torch_speeds[2]).float().mean().item()
    replays = f"replays give the eager steps' tokens: torch {torch_speeds[3] * 100:.0f}%, gemm_dsl {ours_speeds[3] * 100:.0f}%"
    return [
        f"| {name}, greedy decode ({steps} steps after 128, eager) | | | | {torch_speeds[0]:.1f} tok/s "
        f"| {ours_speeds[0]:.1f} tok/s | {ours_speeds[0] / torch_speeds[0]:.3f} |",
        f"| {name}, greedy decode ({steps} steps after 128, static cache, each step a CUDA graph replay) "
        f"| {replays} | | {same_tokens * 100:.1f}% of tokens | {torch_speeds[1]:.1f} tok/s "
        f"| {ours_speeds[1]:.1f} tok/s | {ours_speeds[1] / torch_speeds[1]:.3f} |",
    ]


def profile_section(profiles):
    """The kernel profiles' tables (none without --profile)."""
    if not profiles:
        return []
    lines = ["", "## Where each prefill's GPU time goes (one prefill, torch.profiler)", ""]
    titles = ["Llama, torch", "Llama, gemm_dsl", "Mixtral, torch", "Mixtral, gemm_dsl"]
    for title, profile in zip(titles, profiles):
        lines += profile_lines(title, profile)
    return lines


def compare_prefill(model, prompt, patch, profiles=None):
    """(logit error, argmax agreement, torch ms, gemm_dsl ms, (matmul calls, grouped calls) in
    one patched prefill) of one prefill, the model patched by `patch` (which returns its undo)
    for gemm_dsl's runs and left patched. With `profiles` (a list), each prefill's kernel
    profile is appended to it."""
    with torch.no_grad():
        reference = model(prompt).logits.float()
        if profiles is not None:
            profiles.append(kernel_profile(model, prompt))
        undo = patch(model)
        CALLS[0] = GROUPED_CALLS[0] = 0
        logits = model(prompt).logits.float()
        calls = (CALLS[0], GROUPED_CALLS[0])
        if profiles is not None:
            profiles.append(kernel_profile(model, prompt))
        undo()
        torch_ms, ours_ms = time_in_turns(lambda: model(prompt), lambda: patch(model))
    error = (logits - reference).abs().max().item() / reference.abs().max().item()
    agree = (logits.argmax(-1) == reference.argmax(-1)).float().mean().item()
    return error, agree, torch_ms, ours_ms, calls


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--moe-layers", type=int, default=4, help="0: no MoE model")
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--decode", type=int, default=32)
    parser.add_argument("--out")
    parser.add_argument("--profile", action="store_true", help="add each prefill's top kernels")
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

    profiles = [] if args.profile else None
    config = llama_8b_config(args.layers)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(config).to(torch.bfloat16).eval()
    prompt = torch.randint(0, config.vocab_size, (1, args.tokens), device="cuda")
    name = f"Llama-3-8B shape, {args.layers} layers"
    torch_decode = decode_speeds(model, prompt, args.decode)
    patched = [0]  # the nn.Linear layers the last patch replaced

    def patch_dense(model):
        patched[0], undo = patch_linears(model)
        return undo

    error, agree, torch_ms, ours_ms, (calls, _) = compare_prefill(model, prompt, patch_dense, profiles)
    lines.append(
        f"| {name} | {patched[0]} nn.Linear ({calls} calls a prefill) | {error:.2e} | {agree * 100:.1f}% "
        f"| {args.tokens / torch_ms * 1e3:.0f} tok/s | {args.tokens / ours_ms * 1e3:.0f} tok/s | {torch_ms / ours_ms:.3f} |"
    )
    lines += decode_lines(name, args.decode, torch_decode, decode_speeds(model, prompt, args.decode))
    del model
    torch.cuda.empty_cache()

    if args.moe_layers == 0:
        publish(lines + profile_section(profiles), args.out)
        return
    config = mixtral_config(args.moe_layers)
    with torch.device("cuda"):
        model = transformers.MixtralForCausalLM(config).to(torch.bfloat16).eval()
    prompt = torch.randint(0, config.vocab_size, (1, args.tokens), device="cuda")
    name = f"Mixtral-8x7B shape, {args.moe_layers} layers"

    def patch_moe(model):
        undo_experts = patch_experts()
        patched[0], undo_linears = patch_linears(model)

        def undo():
            undo_experts()
            undo_linears()

        return undo

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
        f"| {name}: torch's eager experts (a loop) against its grouped_mm "
        f"(the noise floor) | | {floor:.2e} | {floor_agree * 100:.1f}% | | | |"
    )
    torch_decode = decode_speeds(model, prompt, args.decode)
    error, agree, torch_ms, ours_ms, (calls, grouped_calls) = compare_prefill(model, prompt, patch_moe, profiles)
    lines.append(
        f"| {name} | experts ({grouped_calls} grouped calls) and "
        f"{patched[0]} nn.Linear ({calls} calls) | {error:.2e} | {agree * 100:.1f}% "
        f"| {args.tokens / torch_ms * 1e3:.0f} tok/s | {args.tokens / ours_ms * 1e3:.0f} tok/s | {torch_ms / ours_ms:.3f} |"
    )
    lines += decode_lines(name, args.decode, torch_decode, decode_speeds(model, prompt, args.decode))
    lines += profile_section(profiles)
    publish(lines, args.out)


if __name__ == "__main__":
    main()
