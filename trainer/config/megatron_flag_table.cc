#include "trainer/config/megatron_flag_table.h"

#include <iterator>

namespace conveyor {
namespace {

using A = MegatronAnswer;

// Megatron-LM at d98e8a64 (megatron/training/arguments.py and the config dataclasses it
// generates flags from). Where a reason says what Megatron does, it is read from there.
constexpr MegatronFlagGroup kGroups[] = {
    // ---- Changes nothing here ------------------------------------------------------
    {A::kNoOp,
     "--no-masked-softmax-fusion --no-bias-gelu-fusion --no-bias-dropout-fusion "
     "--no-bias-swiglu-fusion --no-gradient-accumulation-fusion --no-persist-layer-norm "
     "--no-rope-fusion --apply-rope-fusion --cross-entropy-loss-fusion --cross-entropy-fusion-impl=V "
     "--no-async-tensor-model-parallel-allreduce --moe-permute-fusion --moe-router-fusion "
     "--no-gradient-reduce-div-fusion --fused-residual-rmsnorm --use-transformer-engine-op-fuser "
     "--disable-jit-fuser --moe-permute-fusion-into-hybridep",
     "Conveyor fuses its kernels without changing the math and has no switch for it"},
    {A::kNoOp,
     "--tp-comm-overlap --tp-comm-overlap-cfg=V --tp-comm-overlap-rs-dgrad --tp-comm-bootstrap-backend=V "
     "--no-tp-comm-bulk-dgrad --no-tp-comm-bulk-wgrad --no-tp-comm-overlap-ag "
     "--no-tp-comm-overlap-rs --no-tp-comm-split-ag --no-tp-comm-split-rs "
     "--disable-tp-comm-bulk-dgrad --disable-tp-comm-bulk-wgrad --disable-tp-comm-overlap-ag "
     "--disable-tp-comm-overlap-rs --disable-tp-comm-split-ag --disable-tp-comm-split-rs "
     "--overlap-moe-expert-parallel-comm --overlap-p2p-communication-warmup-flush "
     "--no-overlap-p2p-communication --overlap-param-gather-with-optimizer-step "
     "--overlap-dispatch-backward-with-experts-wgrad --moe-shared-expert-overlap "
     "--ep-overlap-early-attn-memory-release --no-align-grad-reduce --no-align-param-gather "
     "--disable-align-grad-reduce --defer-embedding-wgrad-compute --delay-wgrad-compute "
     "--wgrad-deferral-limit=V --high-priority-a2a-comm-stream --high-priority-stream-groups=V... "
     "--ddp-num-buckets=V --ddp-pad-buckets-for-high-nccl-busbw --create-all-gather-group "
     "--suggested-communication-unit-size=V",
     "when communication overlaps computation, and in which buckets, changes no value; "
     "Conveyor schedules its own (--overlap-grad-reduce, --overlap-param-gather)"},
    {A::kNoOp,
     "--distributed-backend=V --nccl-communicator-config-path=V --use-sharp --sharp-enabled-group=V "
     "--use-nccl-ub --disable-symmetric-registration --symmetric-ar-type=V "
     "--pipeline-model-parallel-comm-backend=V --disable-gloo-process-groups "
     "--use-ring-exchange-p2p --moe-enable-deepep --moe-deepep-num-sms=V "
     "--moe-flex-dispatcher-backend=V --moe-flex-dispatcher-num-sms=V --moe-hybridep-num-sms=V "
     "--moe-hybridep-num-blocks-permute=V --moe-hybridep-num-blocks-unpermute=V "
     "--moe-hybridep-num-sms-preprocessing=V --moe-hybridep-pad-uneven-dispatch-inputs "
     "--moe-ncclep-zero-copy",
     "which library carries a collective changes no value: Conveyor moves host buffers with "
     "gloo and GPU buffers with NCCL, and experts' tokens by all-to-all"},
    {A::kNoOp,
     "--cp-comm-type=V... --hierarchical-context-parallel-sizes=V...",
     "every way Megatron moves keys and values between context-parallel ranks computes the "
     "same exact attention; Conveyor passes them around a ring"},
    {A::kNoOp,
     "--attention-backend=V --flash-attention-version=V --use-te-activation-func --moe-use-grouped-tensor "
     "--use-grouped-gemm-for-dense-mlp --use-grouped-gemm-for-shared-expert",
     "Conveyor picks its kernels itself (the backend line says which); they compute the same "
     "math"},
    {A::kNoOp,
     "--cuda-graph-impl=V --cuda-graph-modules=V... --cuda-graph-scope=V... "
     "--cuda-graph-warmup-steps=V --enable-cuda-graph --external-cuda-graph "
     "--optimizer-cuda-graph --delay-offload-until-cuda-graph",
     "CUDA graphs replay the same kernels; Conveyor launches its kernels itself"},
    {A::kNoOp, "--attention-softmax-in-fp32",
     "Conveyor's attention softmax always computes in fp32"},
    {A::kNoOp, "--apply-query-key-layer-scaling",
     "Megatron divides the attention scores by the layer number and multiplies them back in "
     "an fp32 softmax (it sets --attention-softmax-in-fp32): the same math, kept from "
     "overflowing in fp16; Conveyor's scores and softmax are fp32"},
    {A::kNoOp, "--accumulate-allreduce-grads-in-fp32",
     "Conveyor always accumulates and reduces gradients in fp32 (--grad-reduce-in-bf16 reduces "
     "in bf16)"},
    {A::kNoOp, "--transformer-impl=V --use-mcore-models --use-legacy-models",
     "Conveyor has one model implementation (model/)"},
    {A::kNoOp, "--use-cpu-initialization",
     "Conveyor always initialises the parameters on the host"},
    {A::kNoOp, "--data-impl=V --dataset-impl=V --no-mmap-bin-files",
     "Conveyor reads Megatron's .bin/.idx datasets, the only format, always memory-mapped"},
    {A::kNoOp,
     "--num-workers=V --num-dataset-builder-threads=V --dataloader-defer-npy-index-mmap "
     "--dataloader-fast-cache-load --train-sync-interval=V",
     "Conveyor builds its batches and index caches in the trainer itself; how fast changes "
     "no sample"},
    {A::kNoOp, "--no-create-attention-mask-in-dataloader",
     "the causal mask is never materialised"},
    {A::kNoOp, "--dataloader-type=V", "Conveyor reads samples in Megatron's single order",
     "single"},
    {A::kNoOp, "--enable-msc --disable-msc --object-storage-cache-path=V",
     "Conveyor reads datasets from the file system, without NVIDIA's multi-storage client"},
    {A::kNoOp, "--trust-remote-code",
     "Conveyor runs no code from a model's folder: it reads tokenizer.json and config.json "
     "itself"},
    {A::kNoOp, "--no-save-tokenizer-assets --disable-save-tokenizer-assets",
     "Conveyor's checkpoints hold no tokenizer files"},
    {A::kNoOp,
     "--ckpt-format=V --use-dist-ckpt --dist-ckpt-format=V --dist-ckpt-optim-fully-reshardable "
     "--distrib-optim-fully-reshardable-mem-efficient --dist-ckpt-save-pre-mcore-014 "
     "--ckpt-fully-parallel-save --no-ckpt-fully-parallel-save --ckpt-fully-parallel-load "
     "--ckpt-fully-parallel-save-process-group=V --ckpt-fully-parallel-load-process-group=V "
     "--ckpt-fully-parallel-load-exchange-algo=V --ckpt-fully-parallel-load-per-rank-objects "
     "--ckpt-assume-constant-structure --ckpt-pg-tensors-cache-create "
     "--ckpt-pg-tensors-cache-path=V --ckpt-drop-redundant-extra-state",
     "how Megatron's checkpoint formats lay out, spread and cache their files; Conveyor writes "
     "one format, each rank its own shards, which loads into any layout "
     "(trainer/checkpoint/FORMAT.md)"},
    {A::kNoOp,
     "--no-ckpt-load-validate-sharding-integrity --disable-ckpt-load-validate-sharding-integrity",
     "Conveyor's --load always checks every tensor's shape and checksum, which costs no "
     "collective"},
    {A::kNoOp, "--dist-ckpt-strictness=V",
     "Conveyor's --load is always strict (Megatron's raise_all): every tensor of the model must "
     "be in the checkpoint with its shape, or the run stops naming it"},
    {A::kNoOp, "--auto-detect-ckpt-format",
     "Conveyor recognises what --load holds: its own checkpoints load, and a folder Megatron "
     "wrote is named with the route to convert it"},
    {A::kNoOp,
     "--use-persistent-ckpt-worker --async-strategy=V --async-ckpt-use-cpu-shm "
     "--async-ckpt-cpu-priority=V --async-ckpt-io-priority=V --dist-ckpt-workers=V",
     "how Megatron's asynchronous saver runs its workers; Conveyor's --async-save writes in a "
     "thread of the trainer"},
    {A::kNoOp, "--override-opt-param-scheduler",
     "Conveyor's learning-rate and weight-decay schedule follows the command line unless "
     "--use-checkpoint-opt_param-scheduler takes the checkpoint's"},
    {A::kNoOp, "--deterministic-mode",
     "Conveyor chooses no non-deterministic algorithm: its CPU and CUDA kernels and gloo reduce "
     "in a fixed order (NCCL picks its own algorithm on GPUs: export NCCL_ALGO=Ring, as this "
     "flag does in Megatron, for runs equal bit for bit across machines)"},
    {A::kNoOp, "--te-rng-tracker --inference-rng-tracker",
     "Conveyor draws dropout from its own Philox streams, the same in every layout"},
    {A::kNoOp, "--no-check-for-nan-in-loss-and-grad",
     "Conveyor always checks: a non-finite loss or gradient norm stops the run (--nan-policy "
     "stop, Megatron's check) or skips the step (--nan-policy skip), never reaching the weights "
     "as it would in Megatron without the check"},
    {A::kNoOp, "--rerun-mode=V",
     "Conveyor reruns no iteration: a non-finite loss stops the run or skips the step "
     "(--nan-policy); rerunning iterations to validate results is not implemented",
     "disabled"},
    {A::kNoOp, "--use-tp-pp-dp-mapping",
     "which ranks form which group changes no value (every layout trains the one-rank model); "
     "Conveyor orders ranks as Megatron's default"},
    {A::kNoOp, "--use-precision-aware-optimizer",
     "Conveyor's optimizer keeps fp32 master weights, gradients and Adam moments, Megatron's "
     "default dtypes (--main-params-dtype, --main-grads-dtype, --exp-avg-dtype, "
     "--exp-avg-sq-dtype fp32)"},
    {A::kNoOp, "--main-params-dtype=V --main-grads-dtype=V --exp-avg-dtype=V --exp-avg-sq-dtype=V",
     "Conveyor's master weights, gradients and Adam moments are fp32; other dtypes are not "
     "implemented",
     "fp32"},
    {A::kNoOp, "--softmax-type=V",
     "Conveyor's attention softmax is the vanilla one; off-by-one and learnable softmax are not "
     "implemented",
     "vanilla"},
    {A::kNoOp, "--exit-signal=V",
     "--exit-signal-handler saves and exits on SIGTERM (and SIGINT); other signals are not "
     "handled",
     "SIGTERM"},
    {A::kNoOp, "--no-position-embedding",
     "with --position-embedding-type rope there is no learned position table to disable; "
     "Megatron refuses it with any other type ('--no-position-embedding is deprecated, use "
     "--position-embedding-type')",
     {}, "--position-embedding-type rope"},
    {A::kNoOp,
     "--decoder-seq-length=V",
     "the decoder's length of encoder-decoder models (T5, multimodal); a GPT model reads "
     "--seq-length only"},
    {A::kNoOp, "--sample-rate=V", "Megatron's parser defines it, but no GPT code reads it"},
    {A::kNoOp, "--apply-layernorm-1p",
     "Megatron then stores each norm's gain g as g - 1 (zero-initialised); norm weights take no "
     "weight decay, there and here, so storing g itself trains identically"},
    {A::kNoOp,
     "--wandb-project=V --wandb-exp-name=V --wandb-save-dir=V --wandb-entity=V",
     "Conveyor writes no Weights & Biases logs, so nothing is written there (--tensorboard-dir "
     "DIR writes TensorBoard event files; --metrics-file FILE every log line's figures as JSON "
     "lines)"},
    {A::kNoOp,
     "--one-logger-project=V --one-logger-run-name=V --one-logger-async --no-one-logger "
     "--app-tag-run-name=V --app-tag-run-version=V --otel-enabled --otel-service-name=V "
     "--otel-span-groups=V... --config-logger-dir=V",
     "Conveyor reports to no telemetry service (OneLogger, OpenTelemetry), so nothing is sent; "
     "--metrics-file FILE writes every log line's figures"},
    {A::kNoOp,
     "--log-energy --log-device-memory-used --log-memory-interval=V --log-progress "
     "--log-max-attention-logit --moe-per-layer-logging --log-straggler "
     "--disable-straggler-on-startup --straggler-ctrlr-port=V --straggler-minmax-count=V "
     "--moe-routing-trace-path=V --moe-routing-trace-capture-hidden-states "
     "--moe-routing-trace-capture-logits --moe-routing-trace-dump-weights "
     "--moe-routing-trace-max-training-iters=V --save-activations-interval=V "
     "--save-dgrads-interval=V --save-params-interval=V --save-tokens-per-expert-interval=V "
     "--save-wgrads-interval=V --check-weight-hash-across-dp-replicas-interval=V "
     "--gpu-sniff-test-interval=V --run-workload-inspector-server --flight-recorder-dump-path=V "
     "--flight-recorder-include-stack-trace --flight-recorder-trace-buffer-size=V "
     "--no-flight-recorder-dump-on-timeout --no-flight-recorder-extra-dump-on-exec "
     "--no-flight-recorder-include-only-active --disable-flight-recorder-dump-on-timeout "
     "--disable-flight-recorder-extra-dump-on-exec --disable-flight-recorder-include-only-active",
     "a report or check of Megatron's that Conveyor does not make, so nothing is written; it "
     "changes no value (the log line, --metrics-file and --tensorboard-dir show what Conveyor reports)"},
    {A::kNoOp, "--log-throughput",
     "Conveyor always logs throughput (tokens per second, TFLOP/s per GPU)"},
    {A::kNoOp,
     "--timing-log-level=V --timing-log-option=V --no-barrier-with-level-1-timing",
     "Conveyor always logs the forward-backward, gradient-reduction and optimizer times, the "
     "maximum over ranks"},
    {A::kNoOp,
     "--use-pytorch-profiler --pytorch-profiler-collect-callstack --pytorch-profiler-collect-chakra "
     "--pytorch-profiler-collect-shapes --record-shapes --nvtx-ranges --record-memory-history "
     "--memory-snapshot-path=V",
     "there is no PyTorch profiler here: --profile writes Conveyor's own trace of the steps "
     "--profile-step-start to --profile-step-end"},
    {A::kNoOp, "--logging-level=V",
     "Python's logging level; Conveyor prints its log lines and warnings always"},
    {A::kNoOp, "--local-rank=V",
     "a launcher's rank is read from the environment (LOCAL_RANK, RANK, WORLD_SIZE as torchrun "
     "sets them, or Slurm's)"},
    {A::kNoOp, "--distributed-timeout-seconds-after-init=V",
     "every wait of Conveyor's, at start and after, is bounded by --distributed-timeout-minutes"},
    {A::kNoOp,
     "--adlr-autoresume --adlr-autoresume-interval=V --enable-ft-package --calc-ft-timeouts "
     "--ft-num-warmup-iters=V --inprocess-restart --inprocess-max-iterations=V "
     "--inprocess-monitor-thread-interval=V --inprocess-monitor-process-interval=V "
     "--inprocess-progress-watchdog-interval=V --inprocess-heartbeat-interval=V "
     "--inprocess-soft-timeout=V --inprocess-hard-timeout=V --inprocess-heartbeat-timeout=V "
     "--inprocess-barrier-timeout=V --inprocess-completion-timeout=V "
     "--inprocess-last-call-wait=V --inprocess-termination-grace-time=V "
     "--inprocess-granularity=V --inprocess-active-world-size=V --inprocess-empty-cuda-cache",
     "cluster services that restart a failed job (ADLR autoresume, NVIDIA's fault-tolerance "
     "package, in-process restart) change no value; a failed Conveyor rank stops the job, "
     "which resumes from --save with the same command"},
    {A::kNoOp,
     "--manual-gc --manual-gc-interval=V --no-manual-gc-eval --disable-manual-gc-eval "
     "--empty-unused-memory-level=V",
     "Conveyor is not a Python process: there is no garbage collector or caching allocator to "
     "tune"},
    {A::kNoOp, "--enable-experimental",
     "Conveyor has no experimental switch: each feature it has is on its own flag"},
    {A::kNoOp, "--onnx-safe=V", "Conveyor exports no ONNX graph"},
    {A::kNoOp, "--verify-integrity",
     "Conveyor's checkpoints always carry CRC32C checksums, checked on every load"},
    {A::kNoOp, "--exit-signal-handler-for-training --exit-signal-handler-for-dataloader",
     "a Conveyor rank stops on SIGINT or SIGTERM without a traceback, and has no loader "
     "workers"},

    // ---- Megatron's other spellings ---------------------------------------------------
    {A::kAlias, "--use-rotary-position-embeddings", "--position-embedding-type rope"},
    {A::kAlias, "--encoder-seq-length=V", "--seq-length"},
    // Megatron's own spellings with underscores and "disable-", looked up as written.
    {A::kAlias, "--use-checkpoint-opt_param-scheduler", "--use-checkpoint-opt-param-scheduler"},
    {A::kAlias, "--disable-use-tokenizer-model-from-checkpoint-args",
     "--no-use-tokenizer-model-from-checkpoint-args"},

    // ---- Refused: Megatron's own retired flags --------------------------------------
    {A::kRefused, "--batch-size",
     "retired in Megatron too ('--batch-size argument is no longer valid'): use "
     "--micro-batch-size"},
    {A::kRefused, "--warmup",
     "retired in Megatron too ('--warmup argument is no longer valid'): use "
     "--lr-warmup-fraction or --lr-warmup-iters"},
    {A::kRefused, "--model-parallel-size",
     "retired in Megatron too ('--model-parallel-size is no longer valid'): use "
     "--tensor-model-parallel-size"},
    {A::kRefused, "--checkpoint-activations",
     "retired in Megatron too ('--checkpoint-activations is no longer valid'): use "
     "--recompute-activations or --recompute-granularity and --recompute-method"},
    {A::kRefused, "--yaml-cfg",
     "Megatron's YAML configuration files are not read: pass flags, or --config "
     "FILE.textproto"},

    // ---- Refused: not part of Conveyor (GPT pretraining only) -------------------------
    {A::kRefused,
     "--grpo-* --rl-* --langrl-env-config --perform-rl-step --refit-method "
     "--phase-transition-iterations",
     "reinforcement learning is not part of Conveyor"},
    {A::kRefused,
     "--inference-* --enable-chunked-prefill --flash-decode --num-speculative-tokens "
     "--mlp-chunks-for-prefill --nccl-all-reduce-for-prefill --use-legacy-static-engine "
     "--moe-pad-experts-for-cuda-graph-inference --decode-only-cuda-graphs "
     "--mamba-inference-* --batch-invariant-* --cache-mla-latents --max-tokens-to-oom "
     "--use-same-sampling-seed-across-dp-ranks",
     "inference serving is not part of Conveyor, which trains"},
    {A::kRefused, "--sft --sft-tokenizer-prompt-format --chat-template",
     "supervised fine-tuning datasets (prompts and chat templates) are not implemented: "
     "Conveyor trains on Megatron's pretraining .bin/.idx datasets"},
    {A::kRefused,
     "--logits-* --freeze-all-layers --pretrained-checkpoint",
     "knowledge distillation and Megatron's finetuning tasks are not implemented: --load with "
     "--finetune, or --load-hf, starts from trained weights"},
    {A::kRefused,
     "--bert-* --biencoder-* --ict-* --block-data-path --evidence-data-path --embedding-path "
     "--indexer-* --query-in-block-prob --retriever-* --titles-data-path --use-one-sent-docs "
     "--output-bert-embeddings --short-seq-prob --mask-prob --encoder-num-layers "
     "--decoder-num-layers --relative-attention-*",
     "BERT, T5 and retrieval models are not part of Conveyor, which trains GPT "
     "(decoder-only) models"},
    {A::kRefused,
     "--dino-* --img-h --img-w --patch-dim --num-channels --num-classes --classes-fraction "
     "--data-per-class-fraction --swin-backbone-type --vision-* --iter-per-epoch --mask-type "
     "--mask-factor --mrope-section",
     "vision and multimodal models are not part of Conveyor, which trains text GPT models"},
    {A::kRefused,
     "--mamba-* --hybrid-layer-pattern --hybrid-override-pattern --is-hybrid-model "
     "--linear-attention-freq --linear-conv-kernel-dim --linear-key-head-dim "
     "--linear-num-key-heads --linear-num-value-heads --linear-value-head-dim "
     "--gdp-* --experimental-attention-variant --disable-mamba-mem-eff-path",
     "Mamba, hybrid and linear-attention models are not implemented: Conveyor's layers are "
     "transformer layers"},
    {A::kRefused, "--spec --heterogeneous-layers-config-path --heterogeneous-layers-config-encoded-json",
     "custom and heterogeneous layer specifications are not implemented: every layer is "
     "Conveyor's transformer layer"},

    // ---- Refused: model features not implemented --------------------------------------
    {A::kNoOp, "--mla-down-proj-fusion",
     "fusing multi-latent attention's two down-projections into one GEMM changes no result; "
     "Conveyor runs them as two"},
    {A::kRefused, "--dsa-* --no-dsa-* --disable-dsa-*",
     "DeepSeek sparse attention is not implemented"},
    {A::kRefused,
     "--mtp-use-repeated-layer --mtp-detach-heads --mtp-hsm --mtp-hybrid-override-pattern "
     "--mtp-standalone",
     "this multi-token prediction variant is not implemented: Conveyor has DeepSeek-V3's D "
     "separate depths after the last layer (--mtp-num-layers, --mtp-loss-scaling-factor)"},
    {A::kRefused,
     "--moe-apply-probs-on-input --moe-input-jitter-eps --moe-latent-size "
     "--moe-router-force-load-balancing --moe-router-force-biased "
     "--moe-router-quantile-balancing-ema --moe-expert-rank-capacity-factor "
     "--moe-enable-routing-replay --moe-use-upcycling --moe-upcycling-granularity "
     "--moe-mlp-glu-interleave-size --moe-shared-expert-glu-interleave-size "
     "--moe-single-grouped-weight --moe-single-grouped-bias --moe-combine-bwd-dtype "
     "--moe-dispatch-fwd-dtype --moe-paged-stash*",
     "this mixture-of-experts option is not implemented (README: Mixture of experts lists "
     "those that are)"},
    {A::kRefused,
     "--openai-gelu --quick-geglu --glu-linear-offset --activation-func-clamp-value "
     "--use-fused-weighted-squared-relu",
     "this activation function is not implemented: Conveyor has Megatron's default GeLU, "
     "--swiglu and --squared-relu"},
    {A::kRefused,
     "--rotary-interleaved --rotary-seq-len-interpolation-factor --no-rope-freq --rope-type",
     "this rotary position embedding variant is not implemented"},
    {A::kRefused,
     "--apply-residual-connection-post-layernorm --fp32-residual-connection "
     "--attention-output-gate --qk-l2-norm --qk-clip --qk-clip-alpha --qk-clip-threshold "
     "--enable-mhc-connections --mhc-*",
     "this change to the transformer layer is not implemented"},
    {A::kRefused, "--mup-* --use-mup",
     "maximal-update parametrisation (muP) is not implemented"},
    {A::kRefused,
     "--embedding-init-method-std --init-method-xavier-uniform --no-initialization "
     "--init-model-with-meta-device --data-parallel-random-init",
     "this initialisation option is not implemented: parameters start from --init-method-std "
     "and --seed (or --load, --load-hf)"},
    {A::kRefused, "--no-pad-vocab-size --disable-pad-vocab-size --padded-vocab-size",
     "Conveyor pads --vocab-size up to a multiple of --make-vocab-size-divisible-by x TP, as "
     "Megatron does by default; other padding is not implemented"},

    // ---- Refused: training options not implemented ------------------------------------
    {A::kRefused, "--lion-* --muon-*",
     "this optimizer is not implemented: --optimizer adam or sgd"},
    {A::kRefused,
     "--start-weight-decay --end-weight-decay --weight-decay-incr-style "
     "--no-weight-decay-cond-type --apply-wd-to-qk-layernorm --head-lr-mult",
     "weight-decay schedules and per-parameter learning rates or decay are not implemented: "
     "--weight-decay is constant, and biases and norms take none"},
    {A::kRefused, "--lazy-mpu-init --dump-param-to-param-group-map",
     "not implemented: Megatron's hooks for a framework that manages the parallel groups or "
     "the optimizer's parameter groups itself"},
    {A::kRefused, "--load-main-params-from-ckpt --override-ckpt-iteration --no-save-rng",
     "not implemented: a checkpoint always restores the weights, optimizer state, iteration and "
     "random state it holds (--no-load-optim, --no-load-rng, --finetune leave parts out)"},
    {A::kRefused,
     "--non-persistent-* --persistent-save-interval --replication --replication-factor "
     "--replication-jump --save-retain-interval",
     "local (non-persistent) checkpoints, their replication and retention are not implemented: "
     "every --save-interval save is kept in --save"},
    {A::kRefused, "--ckpt-convert-format --ckpt-convert-save --ckpt-convert-update-legacy-dist-opt-format",
     "converting Megatron's checkpoint formats is not part of the trainer: Conveyor reads its "
     "own checkpoints and Hugging Face folders (--load-hf)"},
    {A::kRefused,
     "--skip-train --start-eval-at-iter --full-validation --multiple-validation-sets "
     "--validation-set-names --eval-micro-batch-size --eval-global-batch-size",
     "this evaluation option is not implemented: every --eval-interval iterations the next "
     "--eval-iters global batches of the validation split are evaluated"},
    {A::kRefused,
     "--fim-* --data-args-path --per-split-data-args-path --per-dataset-sequences-path "
     "--mid-level-dataset-surplus --dataloader-inter-document-masking --no-data-sharding "
     "--use-gigatoken --allow-ambiguous-pad-tokens --decrease-batch-size-if-needed",
     "this dataset option is not implemented: Conveyor reads --data-path (or --train-, "
     "--valid-, --test-data-path) as Megatron's GPTDataset and BlendedDataset do"},
    {A::kRefused,
     "--tokenizer-hf-no-use-fast --tokenizer-hf-no-include-special-tokens --tokenizer-metadata "
     "--tokenizer-special-tokens --tokenizer-sentencepiece-legacy "
     "--no-tokenizer-sentencepiece-ignore-extra-whitespaces "
     "--disable-tokenizer-sentencepiece-ignore-extra-whitespaces --null-tokenizer-eod-id "
     "--null-tokenizer-pad-id --tiktoken-special-tokens",
     "this tokenizer option is not implemented: the tokenizers of --tokenizer-type take "
     "Megatron's defaults"},
    {A::kRefused,
     "--check-for-large-grads --check-for-spiky-loss --result-rejected-tracker-filename "
     "--iterations-to-skip --error-injection-rate --error-injection-type --fault-injector-* "
     "--test-mode --fake-process-group",
     "Megatron's result checks, fault injection and iteration skipping are not implemented"},
    {A::kRefused,
     "--hybrid-context-parallel --max-seqlen-per-dp-cp-rank",
     "hybrid (per-sequence) context parallelism is not implemented: --context-parallel-size"},
    {A::kRefused, "--pipeline-model-parallel-layout",
     "a custom pipeline layout is not implemented: --decoder-first-pipeline-num-layers and "
     "--decoder-last-pipeline-num-layers set the outer stages"},
    {A::kRefused,
     "--microbatch-group-size-per-virtual-pipeline-stage",
     "grouping micro-batches in the interleaved schedule other than by the pipeline size is "
     "not implemented"},
    {A::kRefused,
     "--use-megatron-fsdp --use-torch-fsdp2 --megatron-fsdp-* --fsdp-* --enable-full-sharding-in-hsdp "
     "--data-parallel-sharding-strategy --outer-dp-sharding-strategy "
     "--torch-fsdp2-no-reshard-after-forward --no-strict-fsdp-dtensor-load "
     "--disable-strict-fsdp-dtensor-load --num-distributed-optimizer-instances "
     "--no-use-layer-wise-param-layout --gtp-* --tensor-parallel-num-weight-shards "
     "--expert-tensor-parallel-num-weight-shards",
     "sharded data parallelism (FSDP) is not implemented: --use-distributed-optimizer shards "
     "the optimizer state (ZeRO-1)"},
    {A::kRefused,
     "--optimizer-cpu-offload --optimizer-offload-fraction --overlap-cpu-optimizer-d2h-h2d "
     "--use-torch-optimizer-for-cpu-offload --no-pin-cpu-grads --no-pin-cpu-params "
     "--fine-grained-activation-offloading --fine-grained-offloading-max-inflight-offloads "
     "--offload-modules --activation-offload-fraction --min-offloaded-tensor-size "
     "--cpu-offloading-num-layers --cpu-offloading-retain-pinned-cpu-buffers "
     "--delta-offload-bytes-across-pp-ranks --moe-layer-recompute "
     "--distribute-saved-activations --mlp-chunks-for-training "
     "--disable-clone-scatter-output-in-embedding --no-clone-scatter-output-in-embedding",
     "this way of saving GPU memory (offloading to the host, recomputing or splitting one "
     "module) is not implemented; it changes no value, but the run needs the memory --dry-run "
     "shows without it (--recompute-activations, --recompute-granularity full are "
     "implemented)"},
    {A::kRefused,
     "--ddp-average-in-collective --ddp-reduce-scatter-with-fp32-accumulation "
     "--ddp-param-name-patterns-for-fp32-local-accumulation "
     "--disable-bf16-reduced-precision-matmul --output-logit-dtype",
     "this precision option is not implemented: Conveyor sums gradients over ranks before one "
     "division, in fp32 (bf16 with --grad-reduce-in-bf16), and multiplies bf16 in fp32"},

    // ---- Refused: low precision -------------------------------------------------------
    {A::kRefused,
     "--fp8-* --fp4-* --no-fp8-wgrad --disable-fp8-wgrad --keep-fp8-transpose-cache "
     "--first-last-layers-bf16 --num-layers-at-start-in-bf16 --num-layers-at-end-in-bf16 "
     "--moe-router-padding-for-fp8 --moe-router-padding-for-quantization "
     "--reuse-grad-buf-for-mxfp8-param-ag --te-precision-config-file --kitchen-* "
     "--use-kitchen-attention",
     "FP8 and FP4 training need a GPU path that has not run yet: Conveyor trains in bf16 "
     "(--bf16) or fp32"},
    {A::kRefused,
     "--loss-scale --initial-loss-scale --min-loss-scale --loss-scale-window --hysteresis "
     "--fp16-lm-cross-entropy --no-log-loss-scale-to-tensorboard "
     "--disable-log-loss-scale-to-tensorboard",
     "loss scaling is for fp16, which Conveyor does not train; bf16 (--bf16) needs none: drop "
     "the flag"},
};

}  // namespace

absl::Span<const MegatronFlagGroup> MegatronFlagGroups() {
  return absl::MakeConstSpan(kGroups, std::size(kGroups));
}

}  // namespace conveyor
