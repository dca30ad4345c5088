#!/usr/bin/env python3
"""Writes AICB-style SimAI workload text for a GPT or MoE model, seeded.

Workloads that netsim was not tuned on: the layer shapes follow Megatron's
arithmetic (a transformer layer of hidden size h over s tokens), each line's
compute time is drawn independently within +/- `--jitter` of its nominal
value (profiled compute times are never identical), and the layout (TP, PP,
EP, micro-batches) is the caller's. The output is the text AICB writes and
`netsim run --workload FILE` reads:

    python3 benches/gen_workload.py --gpus 128 --tp 8 --pp 2 --layers 16 \
        --seed 7 --jitter 0.05 > gpt-128.txt
    python3 benches/gen_workload.py --model moe --gpus 128 --tp 2 --ep 8 > moe.txt

Per micro-batch: an `embedding_layer` line, then per transformer layer an
attention line and an MLP (dense) or expert (MoE) line. Forward and
input-gradient collectives are all-reduces on the TP group (MoE experts:
all-to-all on the EP group); weight gradients are all-reduced on the DP
group in the last micro-batch only, as Megatron accumulates gradients
across micro-batches. Compute is FLOPs over `--tflops` (effective, per GPU);
the backward pass costs twice the forward, split evenly between input and
weight gradients.
"""

import argparse
import random
import sys

BYTES_PER_VALUE = 2  # bf16 activations and gradients


def layer_lines(a, rng, last_micro_batch):
    """The lines of one micro-batch: embedding, then attention and MLP per layer."""
    h, tokens = a.hidden, a.seq * a.micro_batch
    activation_bytes = tokens * h * BYTES_PER_VALUE
    tp_op = "ALLREDUCE" if a.tp > 1 else "NONE"
    tp_bytes = activation_bytes if a.tp > 1 else 0

    def ns(flops):
        return flops / (a.tflops * 1e12) * 1e9

    def jittered(nominal_ns):
        return max(1, round(nominal_ns * rng.uniform(1 - a.jitter, 1 + a.jitter)))

    def line(name, fwd_flops, fwd, wg_params):
        fwd_ns = ns(fwd_flops)
        wg_op, wg_bytes = "NONE", 0
        if last_micro_batch and a.dp > 1 and wg_params > 0:
            wg_op, wg_bytes = "ALLREDUCE", wg_params * BYTES_PER_VALUE
        return (
            f"{name}\t-1\t{jittered(fwd_ns)}\t{fwd[0]}\t{fwd[1]}\t"
            f"{jittered(fwd_ns)}\t{fwd[0]}\t{fwd[1]}\t"
            f"{jittered(fwd_ns)}\t{wg_op}\t{wg_bytes}\t{jittered(fwd_ns / 10)}"
        )

    vocab_params = a.vocab * h // a.tp
    out = [line("embedding_layer", 2 * tokens * vocab_params, (tp_op, tp_bytes), vocab_params)]
    for i in range(a.layers):
        attn_params = 4 * h * h // a.tp
        attn_flops = 2 * tokens * attn_params + 4 * tokens * a.seq * h // a.tp
        out.append(line(f"attention_layer{i}", attn_flops, (tp_op, tp_bytes), attn_params))
        mlp_params = 8 * h * h // a.tp
        if a.model == "moe":
            # Each token visits top_k experts; its activations cross the EP group twice.
            a2a_bytes = activation_bytes * a.top_k // a.tp
            expert_params = mlp_params * (a.experts // a.ep)
            out.append(
                line(
                    f"moe_layer{i}",
                    2 * tokens * mlp_params * a.top_k,
                    ("ALLTOALL_EP", a2a_bytes),
                    expert_params,
                )
            )
        else:
            out.append(line(f"mlp_layer{i}", 2 * tokens * mlp_params, (tp_op, tp_bytes), mlp_params))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["gpt", "moe"], default="gpt")
    p.add_argument("--gpus", type=int, default=128)
    p.add_argument("--tp", type=int, default=8)
    p.add_argument("--pp", type=int, default=1)
    p.add_argument("--ep", type=int, default=1, help="expert-parallel group size (MoE)")
    p.add_argument("--layers", type=int, default=16, help="transformer layers per stage")
    p.add_argument("--micro-batches", type=int, default=1, help="`ga`: micro-batches")
    p.add_argument("--hidden", type=int, default=5120)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--micro-batch", type=int, default=1, help="sequences per micro-batch")
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--tflops", type=float, default=200.0, help="effective per GPU")
    p.add_argument("--jitter", type=float, default=0.05, help="compute +/- fraction")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if a.model == "moe" and a.ep == 1:
        a.ep = a.experts
    ranks_per_replica = a.tp * a.pp
    if a.gpus % ranks_per_replica or a.ep > a.gpus // ranks_per_replica:
        sys.exit(f"gen_workload: --gpus {a.gpus} is not a multiple of tp x pp = {ranks_per_replica} with ep <= dp")
    if not 0 <= a.jitter < 1:
        sys.exit("gen_workload: --jitter must be in [0, 1)")
    a.dp = a.gpus // ranks_per_replica
    rng = random.Random(a.seed)
    lines = []
    for m in range(a.micro_batches):
        lines += layer_lines(a, rng, m + 1 == a.micro_batches)
    header = (
        f"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: {a.tp} ep: {a.ep} "
        f"pp: {a.pp} vpp: 1 ga: {a.micro_batches} all_gpus: {a.gpus} checkpoints: 0 "
        f"checkpoint_initiates: 0"
    )
    if a.pp > 1:
        header += f" pp_comm: {a.seq * a.micro_batch * a.hidden * BYTES_PER_VALUE}"
    print(header)
    print(len(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
