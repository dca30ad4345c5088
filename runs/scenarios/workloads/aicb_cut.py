#!/usr/bin/env python3
"""Writes the two AICB-style training workloads that fast-forward is measured on.

    python3 runs/scenarios/workloads/aicb_cut.py           # rewrites both files below
    python3 runs/scenarios/workloads/aicb_cut.py --whole   # also the whole models

The files are SimAI workload text, line for line as AICB's SimAI training
generator (aliyun/aicb `workload_generator/SimAI_training_workload_generator.py`,
Megatron frame, sequence parallel on, no AIOB: every compute time is AICB's
default of 1 ns) lays them out, with one change: the models are cut to a few
of their layers so that a packet-level run with `--fast-forward off` takes
minutes on a laptop-class core, not hours. Everything a layer sends keeps
AICB's size; the gradient collectives shrink with the layers cut, as they
are sized from the parameter count of what is left.

Sizes (bytes, bf16 = 2 bytes per element), as AICB computes them:

- `tp_comm = 2 * micro_batch * seq * hidden`: each column-linear's forward
  all-gather and each row-linear's forward reduce-scatter and backward
  all-gather on the TP group (the column-linear's backward reduce-scatter
  is written with size 0, as AICB writes it, so it sends nothing), the
  embedding's forward all-reduce and `embedding_grads`' backward one.
- MoE layer (Megatron core 0.13 dispatcher): an EP all-gather of
  `2 * ep * experts * tp` bytes (routing counts), EP all-to-all dispatch and
  combine of `tp_comm * topk / tp` each way, and TP all-gather and
  reduce-scatter of `tp_comm * topk` around the experts.
- DP: `grad_gather` all-gathers `2 * P` and `grad_param_comm`
  reduce-scatters `4 * P` (distributed optimizer: bf16 parameters out,
  fp32 gradients in) on the DP group, `P` = the dense parameters one rank
  holds; with experts, `moe_grad_norm1`/`2` do the same for the expert
  parameters on the DP_EP group. Parameters per rank (Megatron GPT,
  divided over TP): `12 h^2 + 13 h` per dense layer (attention 4 h^2, MLP
  8 h^2 with ffn = 4h), `4 h^2` for attention alone in the MoE model (AICB's
  mocked attention, no GQA), `2 h ffn * experts / ep` per MoE layer (AICB's
  two expert matrices), and the word embedding `vocab_padded * h` (vocab
  padded to a multiple of 128 x TP, as Megatron pads it).
- `pp_comm = tp_comm / tp` between adjacent stages (sequence parallel).

Workloads:

- `gpt13b-tp8-pp2-128.txt`: GPT-13B (40 layers, hidden 5120, 40 heads,
  seq 2048, vocab 50257, micro-batch 1) on 128 GPUs with TP 8 x PP 2 x DP 8,
  as SimAI's own `example/workload_gpt13b_128g.txt`; 2 micro-batches (AICB's
  `ga_num` default); **cut to 2 layers per stage (4 of 40)**.
- `gpt13b-tp8-pp2-128-whole.txt` (`--whole`): the same, uncut (20 layers
  per stage, all 40); DP collectives 7.4x the cut's, TP collectives 10x as
  many. A run with `--fast-forward off` takes ~10x the cut's.
- `mixtral-8x7b-ep8-tp2-128.txt`: Mixtral-8x7B as AICB's `moe` preset
  (32 layers, hidden 4096, 32 heads, ffn 14336, TP 2, 8 experts, top-2,
  seq 2048, vocab 50257, micro-batch 1) on 128 GPUs with EP 8 x DP 64;
  1 micro-batch; **cut to 2 layers (of 32)**.
- `mixtral-8x7b-ep8-tp2-128-whole.txt` (`--whole`): the same, uncut (all
  32 layers); DP collectives 6.9x the cut's (dense: attention and the
  embedding), DP_EP collectives 16x (the experts), layer collectives 16x
  as many.
- `mixtral-8x7b-ep8-tp8-128.txt` and `-whole.txt`: the same model laid out
  along the rails: TP 8 (a server's NVSwitch), EP 8 (one GPU index on 8
  servers: one rail), DP 16, DP_EP 2. Its DP and EP groups stay on rail
  leaves, as GPT-13B's DP groups do, where the TP 2 layout's DP-64 rings
  cross rails through the spines.
"""

import argparse
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def line(name, fwd=(1, "NONE", 0), ig=(1, "NONE", 0), wg=(1, "NONE", 0), update=100):
    fields = [name, -1, *fwd, *ig, *wg, update]
    return "\t".join(str(f) for f in fields)


def padded_vocab(vocab, tp):
    multiple = 128 * tp
    return -(-vocab // multiple) * multiple


def workload(*, tp, pp, ep, ga, gpus, layers, total_layers, hidden, seq, vocab,
             micro_batch, ffn=None, experts=1, topk=1):
    moe = experts > 1
    dp = gpus // (tp * pp)
    tp_comm = 2 * micro_batch * seq * hidden
    attention = 4 * hidden * hidden // tp
    dense_mlp = 8 * hidden * hidden // tp
    norms = 13 * hidden // tp
    embedding = padded_vocab(vocab, tp) * hidden // tp
    expert_params = 2 * hidden * ffn * (experts // ep) // tp if moe else 0
    per_layer = attention + norms + (0 if moe else dense_mlp)
    dense_params = layers * per_layer + embedding
    moe_params = layers * expert_params
    out = [
        line("grad_gather", wg=(1, "ALLGATHER", 2 * dense_params)),
        line("grad_param_comm", wg=(1, "REDUCESCATTER", 4 * dense_params)),
        line("grad_param_compute", ig=(2, "NONE", 0)),
        line("embedding_grads", ig=(1, "ALLREDUCE", tp_comm)),
    ]
    if ep != dp:
        out.append(line("moe_grad_norm1", wg=(1, "ALLGATHER_DP_EP", 2 * moe_params)))
        out.append(line("moe_grad_norm2", wg=(1, "REDUCESCATTER_DP_EP", 4 * moe_params)))
    # AICB halves the (AIOB) compute time of the linears: int(1 / 2) = 0.
    column = lambda n: line(n, fwd=(0, "ALLGATHER", tp_comm), ig=(0, "REDUCESCATTER", 0), wg=(0, "NONE", 0))
    row = lambda n: line(n, fwd=(0, "REDUCESCATTER", tp_comm), ig=(0, "ALLGATHER", tp_comm), wg=(0, "NONE", 0))
    for _ in range(ga):
        out.append(line("embedding_layer", fwd=(1, "ALLREDUCE", tp_comm)))
        for _ in range(layers):
            out += [column("attention_column"), row("attention_row")]
            if moe:
                a2a = tp_comm * topk // tp
                out += [
                    line("mlp_moelayer", fwd=(1, "ALLGATHER_EP", 2 * ep * experts * tp)),
                    line("mlp_moelayer", fwd=(1, "ALLTOALL_EP", a2a), ig=(1, "ALLTOALL_EP", a2a)),
                    line("mlp_moelayer", fwd=(1, "ALLGATHER", tp_comm * topk), ig=(1, "REDUCESCATTER", tp_comm * topk)),
                    line("mlp_moelayer", fwd=(1, "REDUCESCATTER", tp_comm * topk), ig=(1, "ALLGATHER", tp_comm * topk)),
                    line("mlp_moelayer", fwd=(1, "ALLTOALL_EP", a2a), ig=(1, "ALLTOALL_EP", a2a)),
                ]
            else:
                out += [column("mlp_column"), row("mlp_row")]
        out.append(column("final_column"))
    for i in range(3):
        out.append(line(f"cross_entropy{i + 1}", fwd=(0, "ALLREDUCE", seq * micro_batch * 4),
                        ig=(0, "NONE", 0), wg=(0, "NONE", 0)))
    for i in range(4):
        out.append(line(f"optimizer{i + 1}", fwd=(0, "ALLREDUCE", 4), ig=(0, "NONE", 0), wg=(0, "NONE", 0)))
    pp_comm = tp_comm // tp if pp > 1 else 0
    header = (f"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: {tp} ep: {ep} "
              f"pp: {pp} vpp: {total_layers} ga: {ga} all_gpus: {gpus} checkpoints: 0 "
              f"checkpoint_initiates: 0 pp_comm: {pp_comm}")
    return "\n".join([header, str(len(out)), *out]) + "\n"


WORKLOADS = {
    "gpt13b-tp8-pp2-128.txt": dict(
        tp=8, pp=2, ep=1, ga=2, gpus=128, layers=2, total_layers=40, hidden=5120,
        seq=2048, vocab=50257, micro_batch=1),
    "mixtral-8x7b-ep8-tp2-128.txt": dict(
        tp=2, pp=1, ep=8, ga=1, gpus=128, layers=2, total_layers=32, hidden=4096,
        seq=2048, vocab=50257, micro_batch=1, ffn=14336, experts=8, topk=2),
    "mixtral-8x7b-ep8-tp8-128.txt": dict(
        tp=8, pp=1, ep=8, ga=1, gpus=128, layers=2, total_layers=32, hidden=4096,
        seq=2048, vocab=50257, micro_batch=1, ffn=14336, experts=8, topk=2),
}


WHOLE = {
    "gpt13b-tp8-pp2-128-whole.txt": dict(WORKLOADS["gpt13b-tp8-pp2-128.txt"], layers=20),
    "mixtral-8x7b-ep8-tp2-128-whole.txt": dict(WORKLOADS["mixtral-8x7b-ep8-tp2-128.txt"], layers=32),
    "mixtral-8x7b-ep8-tp8-128-whole.txt": dict(WORKLOADS["mixtral-8x7b-ep8-tp8-128.txt"], layers=32),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--whole", action="store_true", help="also write the uncut models")
    args = parser.parse_args()
    for name, params in {**WORKLOADS, **(WHOLE if args.whole else {})}.items():
        with open(os.path.join(HERE, name), "w") as f:
            f.write(workload(**params))


if __name__ == "__main__":
    main()
