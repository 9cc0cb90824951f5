// The NeoX key table: see neox_keys.h. Rows follow NeoX's configs/neox_arguments.md section by
// section, then the older names NeoX configs still carry. The handlers of the honoured keys are
// in neox_config.cc; a test walks NeoX's documented list against this table.
#include "runtime/config/neox_keys.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace ds::runtime {
namespace {

constexpr KeyEffect H = KeyEffect::Honoured;
constexpr KeyEffect N = KeyEffect::NoEffect;
constexpr KeyEffect O = KeyEffect::Observer;
constexpr KeyEffect X = KeyEffect::NotImplemented;

constexpr std::string_view kLauncherKey =
    "an option of NeoX's deepy.py launcher; ds-launch takes --hostfile, --include, --exclude, "
    "--num_nodes, --num_gpus, --master_port, --launcher on its command line";
constexpr std::string_view kTextgenKey =
    "an option of NeoX's generate.py; ds-generate takes its own command-line options";
constexpr std::string_view kSetAtLaunch = "NeoX computes it at launch; here ds-launch does";
constexpr std::string_view kMambaKey = "only used by mamba layers (attention-config refuses them)";
constexpr std::string_view kRwkvKey = "only used by rwkv layers (attention-config refuses them)";
constexpr std::string_view kMupKey = "only used with use-mup (not implemented)";
constexpr std::string_view kWandbKey = "only used with use-wandb (W&B is not provided here)";
constexpr std::string_view kCometKey = "only used with use-comet (Comet is not provided here)";
constexpr std::string_view kFusedKernel =
    "chooses one of NeoX's fused CUDA kernels; the maths is the same here";
constexpr std::string_view kPairwiseData =
    "pairwise positive/negative datasets (train-impl dpo/rm)";
constexpr std::string_view kRewardData = "reward datasets (train-impl kto)";
constexpr std::string_view kFromZeroBlock =
    "NeoX derives it from the zero_optimization block and ignores a value given here; set it "
    "there";
constexpr std::string_view kFromOptimizerBlock =
    "NeoX derives it from the optimizer block's type and ignores a value given here; name the "
    "optimizer there";
constexpr std::string_view kPartitionActivations =
    "splits each checkpointed block input over the model-parallel ranks, all-gathered before "
    "its recomputation; no effect at model-parallel-size 1 or without checkpoint-activations, "
    "as in DeepSpeed";
constexpr std::string_view kTransformerEngineKey =
    "only used by NVIDIA Transformer Engine layers (not implemented)";
constexpr std::string_view kLabelData =
    "label datasets, one per data path: a sample's targets are its labels, negative ones (-100) "
    "masked out of the loss";
constexpr std::string_view kOnlyDpoKto = "only used with train-impl dpo or kto (not implemented)";

const std::vector<NeoxKeyRule> kTable = {
    // NeoXArgsLRScheduler
    {"lr-decay-style", H, "the lr schedule's decay: linear, cosine or constant"},
    {"lr-decay-iters", H, "iterations the lr decays over (default train-iters)"},
    {"lr-decay-fraction", H, "lr-decay-iters as a fraction of train-iters (overrides it)"},
    {"min-lr", H, "the lr's floor"},
    {"warmup", H, "warmup iterations as a fraction of lr-decay-iters"},
    {"override-lr-scheduler", H,
     "the config's lr schedule applies on resume, the checkpoint keeping only its position (so it "
     "is always on here; off does not check that the two agree)"},
    {"use-checkpoint-lr-scheduler", X, "taking the lr schedule from the loaded checkpoint"},
    // NeoXArgsLogging
    {"use-wandb", O, "Weights & Biases logging"},
    {"wandb-group", N, kWandbKey},
    {"wandb-team", N, kWandbKey},
    {"wandb-project", N, kWandbKey},
    {"wandb-host", N, kWandbKey},
    {"wandb-init-all-ranks", N, kWandbKey},
    {"git-hash", N, "NeoX records its own commit here"},
    {"log-dir", N,
     "each rank's log goes to its output, which ds-launch prefixes and collects; tensorboard-dir "
     "writes event files"},
    {"tensorboard-dir", H, "TensorBoard event files (the DeepSpeed tensorboard block)"},
    {"use-comet", O, "Comet logging"},
    {"comet-workspace", N, kCometKey},
    {"comet-project", N, kCometKey},
    {"comet-experiment-name", N, kCometKey},
    {"comet-tags", N, kCometKey},
    {"comet-others", N, kCometKey},
    {"log-interval", H, "iterations between progress lines (and steps_per_print)"},
    {"log-grad-pct-zeros", O, "logging the fraction of zero gradients"},
    {"log-param-norm", O, "logging the parameter norm"},
    {"log-grad-norm", O, "logging per-parameter gradient norms"},
    {"log-optimizer-states", O, "logging the optimizer states' norms"},
    {"log-gradient-noise-scale", O, "the gradient noise scale"},
    {"gradient-noise-scale-n-batches", N, "only used with log-gradient-noise-scale"},
    {"gradient-noise-scale-cpu-offload", N, "only used with log-gradient-noise-scale"},
    {"memory-profiling", O, "PyTorch's CUDA memory profiling"},
    {"memory-profiling-path", N, "only used with memory-profiling"},
    {"profile", O, "NVIDIA Nsight profiling ranges"},
    {"profile-step-start", N, "only used with profile"},
    {"profile-step-stop", N, "only used with profile"},
    // NeoXArgsMoE
    {"moe-num-experts", H, "experts per MoE layer (1: no MoE; docs/gpt-trainer.md)"},
    {"moe-expert-interval", H, "layer l (from 0) is a MoE layer when l % interval == 0"},
    {"moe-top-k", H, "experts per token"},
    {"moe-router-type", H, "the dropless router: sinkhorn or topk"},
    {"moe-lbl-in-fp32", N, "NeoX reads it and never uses it; gating runs in fp32 here"},
    {"moe-jitter-eps", H, "the topk router's multiplicative input jitter in training"},
    // NeoXArgsModel
    {"precision", H, "fp16, bfloat16 or fp32 (the DeepSpeed fp16 / bf16 blocks)"},
    {"num-layers", H, "transformer layers"},
    {"hidden-size", H, "the model width"},
    {"intermediate-size", H, "the MLP width (NeoX's sizing for gated activations)"},
    {"mlp-multiple-of", H, "rounds the MLP width up to a multiple"},
    {"expansion-factor", H, "the MLP width as int(factor x hidden-size)"},
    {"num-attention-heads", H, "query heads"},
    {"num-kv-heads", H, "key/value heads (grouped-query attention)"},
    {"seq-length", H, "tokens per sample"},
    {"sliding-window-width", H, "Mistral's sliding-window attention (flash layers)"},
    {"max-position-embeddings", H, "the position table's length"},
    {"norm", H, "layernorm, rmsnorm or scalenorm"},
    {"layernorm-fusion", N, kFusedKernel},
    {"rmsnorm-fusion", N, kFusedKernel},
    {"use-qk-layernorm", H, "NeoX's norm of queries and keys before rotary"},
    {"layernorm-epsilon", H, "layernorm's epsilon"},
    {"rms-norm-epsilon", H, "rmsnorm's epsilon"},
    {"scalenorm-epsilon", H, "scalenorm's epsilon"},
    {"pos-emb", H, "learned, rotary, sinusoidal or none"},
    {"rpe-num-buckets", N, "only used with pos-emb rpe (not implemented)"},
    {"rpe-max-distance", N, "only used with pos-emb rpe (not implemented)"},
    {"opt-pos-emb-offset", X,
     "OPT's learned-position offset (which NeoX also advances from call to call, an inference "
     "cache)",
     "0"},
    {"no-weight-tying", H, "separate input embedding and output layer"},
    {"attention-config", H,
     "per-layer attention kinds: global and flash (dense attention); the others are refused"},
    {"sparsity-config", N, "only used by sparse attention kinds (attention-config refuses them)"},
    {"num-unique-layers", X, "layers sharing parameters", ""},
    {"param-sharing-style", N, "only used with num-unique-layers (not implemented)"},
    {"make-vocab-size-divisible-by", H, "pads the vocabulary to a multiple"},
    {"activation", H, "the MLP's activation, gated or not"},
    {"use-flashattn-swiglu", N, kFusedKernel},
    {"scaled-upper-triang-masked-softmax-fusion", N, "the causal softmax is always fused here"},
    {"scaled-masked-softmax-fusion", N, "the causal softmax is always fused here"},
    {"bias-gelu-fusion", N, "bias and GeLU run in fused kernels here"},
    {"bias-dropout-fusion", N, "bias and dropout run in fused kernels here"},
    {"rope-fusion", N, kFusedKernel},
    {"fused-kernels-build-path", N, "where NeoX builds its CUDA kernels"},
    {"fp16-lm-cross-entropy", X, "the cross-entropy in fp16"},
    {"init-method-std", H, "the initialisers' standard deviation"},
    {"apply-query-key-layer-scaling", N, "a fp16 overflow guard; attention is fp32 here"},
    {"use-cpu-initialization", N, "parameters are initialised on the CPU"},
    {"attention-softmax-in-fp32", N, "attention is computed in fp32 here"},
    {"rotary-pct", H, "the fraction of each head rotary embeddings turn"},
    {"rotary-emb-base", H, "rotary embeddings' base"},
    {"rotary-save-freqs-buffer", N,
     "whether NeoX stores the rotary frequencies in its checkpoints; they are recomputed here"},
    {"init-method", H, "the initialiser of the input-side weights"},
    {"output-layer-init-method", H, "the initialiser of the output-side weights"},
    {"gmlp-attn-dim", N, "only used by gmlp layers (attention-config refuses them)"},
    {"gpt-j-residual", H, "attention and MLP in parallel, as GPT-J"},
    {"gpt-j-tied", H, "one norm shared by GPT-J's parallel attention and MLP"},
    {"use-bias-in-norms", H, "biases in the norms"},
    {"use-bias-in-attn-linear", H, "biases in the attention's linear layers"},
    {"use-bias-in-mlp", H, "biases in the MLP's linear layers"},
    {"soft-prompt-tuning", X, "soft prompt tuning", ""},
    {"mamba-selective-scan-fusion", N, kMambaKey},
    {"mamba-causal-conv-fusion", N, kMambaKey},
    {"mamba-inner-func-fusion", N, kMambaKey},
    {"mamba-selective-fp32-params", N, kMambaKey},
    {"mamba-use-bias-in-conv", N, kMambaKey},
    {"mamba-use-bias-in-linears", N, kMambaKey},
    {"output-layer-parallelism", H,
     "how the output layer is split over model-parallel ranks: \"column\" (by vocabulary, with "
     "a vocabulary-parallel cross-entropy), NeoX's only accepted value; any other is refused"},
    {"dim-att", N, kRwkvKey},
    {"head-size", N, kRwkvKey},
    {"ffn-dim", N, kRwkvKey},
    // NeoXArgsOptimizer
    {"optimizer-type", N, kFromOptimizerBlock},
    {"use-bnb-optimizer", X, "bitsandbytes' 8-bit optimizers"},
    {"zero-stage", N, kFromZeroBlock},
    {"zero-reduce-scatter", N, kFromZeroBlock},
    {"zero-contiguous-gradients", N, kFromZeroBlock},
    {"zero-reduce-bucket-size", N, kFromZeroBlock},
    {"zero-allgather-bucket-size", N, kFromZeroBlock},
    {"lr", H, "the optimizer's peak lr"},
    // NeoXArgsOther
    {"distributed-backend", N,
     "collectives follow the DeepSpeed config's communication_data_type and the launcher"},
    {"local-rank", N, "ds-launch sets ranks"},
    {"rank", N, "ds-launch sets ranks"},
    {"lazy-mpu-init", N, "the model-parallel groups are always built at start-up"},
    {"short-seq-prob", N, "a BERT data option; GPT samples are whole seq-length windows"},
    {"eod-mask-loss", X, "masking the loss at end-of-document tokens"},
    {"adlr-autoresume", X, "ADLR's autoresume"},
    {"adlr-autoresume-interval", N, "only used with adlr-autoresume"},
    {"seed", H, "the initialisation and data seed"},
    {"onnx-safe", N, "no ONNX export"},
    {"deepscale", N, "an old DeepSpeed switch; NeoX always runs DeepSpeed"},
    {"deepscale-config", X, "the old name of deepspeed-config (use that)", ""},
    {"deepspeed-mpi", N, "ds-launch --launcher openmpi starts MPI jobs"},
    {"deepspeed-slurm", N, "ds-launch --launcher slurm starts Slurm jobs"},
    {"user-script", N, "the GPT trainer is built in; ds-launch runs other programs as its command"},
    {"iteration", N, "NeoX sets it at run time; a resumed job starts at its checkpoint's"},
    {"do-train", N, "NeoX sets it from the data paths"},
    {"do-valid", N, "NeoX sets it from the data paths"},
    {"do-test", N, "NeoX sets it from the data paths"},
    {"save-iters", H, "derived from checkpoint-factor and extra-save-iters, as in NeoX"},
    {"global-num-gpus", N, kSetAtLaunch},
    // NeoXArgsParallelism
    {"pipe-parallel-size", H,
     "pipeline stages (0 and 1: one), layers split by pipe-partition-method and run through "
     "DeepSpeed's 1F1B schedule; the batch rules divide by world / (pipe x model); ZeRO 0 or 1 "
     "only with more than one stage, as in DeepSpeed"},
    {"model-parallel-size", H,
     "tensor slices per layer (Megatron's column/row split, heads and kv heads divided, "
     "vocabulary-parallel embedding and cross-entropy); the batch rules divide by world / (pipe x "
     "model)"},
    {"pipe-partition-method", H,
     "how layers are split over pipeline stages: parameters, uniform or type:REGEX"},
    {"world-size", N, kSetAtLaunch},
    {"is-pipe-parallel", N, "NeoX derives it from pipe-parallel-size"},
    {"sequence-parallel", H,
     "Megatron's sequence parallelism with model-parallel-size > 1: norms, residual sums and "
     "dropouts on 1/t of each micro-batch's tokens per model rank, all-gathered before the "
     "column-parallel products and reduce-scattered after the row-parallel ones; seq-length must "
     "divide by model-parallel-size; no effect at size 1 (as in NeoX); pipeline stages pass "
     "each model rank's share of the tokens"},
    // NeoXArgsTextgen
    {"text-gen-type", N, kTextgenKey},
    {"precompute-model-name", X, "precomputed reference log-probabilities (train-impl dpo)", ""},
    {"temperature", N, kTextgenKey},
    {"top-p", N, kTextgenKey},
    {"top-k", N, kTextgenKey},
    {"return-logits", N, kTextgenKey},
    {"maximum-tokens", N, kTextgenKey},
    {"prompt-end", N, kTextgenKey},
    {"sample-input-file", N, kTextgenKey},
    {"sample-output-file", N, kTextgenKey},
    {"num-samples", N, kTextgenKey},
    {"recompute", N, kTextgenKey},
    {"eval-results-prefix", N, "an option of NeoX's eval.py"},
    {"eval-tasks", N, "an option of NeoX's eval.py"},
    // NeoXArgsTokenizer
    {"tokenizer-type", H, "the tokenizer (with vocab-file and merge-file)"},
    {"padded-vocab-size", N, "computed from the tokenizer and make-vocab-size-divisible-by"},
    // NeoXArgsTraining
    {"data-path", H, "the indexed dataset (PREFIX.bin / PREFIX.idx) split by split"},
    {"use-shared-fs", N, "each rank reads the dataset's files itself"},
    {"train-data-paths", H, "training datasets, blended by train-data-weights"},
    {"train-label-data-paths", H, kLabelData},
    {"train-reward-data-paths", X, kRewardData, ""},
    {"test-data-paths", H, "test datasets (ds-config check reads them; no test evaluation runs)"},
    {"test-label-data-paths", H,
     "label datasets of test-data-paths (ds-config check reads them; no test evaluation runs)"},
    {"test-reward-data-paths", X, kRewardData, ""},
    {"valid-data-paths", H, "validation datasets, blended by valid-data-weights"},
    {"valid-label-data-paths", H, kLabelData},
    {"valid-reward-data-paths", X, kRewardData, ""},
    {"pos-train-data-paths", X, kPairwiseData, ""},
    {"neg-train-data-paths", X, kPairwiseData, ""},
    {"pos-train-label-data-paths", X, kPairwiseData, ""},
    {"neg-train-label-data-paths", X, kPairwiseData, ""},
    {"pos-valid-data-paths", X, kPairwiseData, ""},
    {"neg-valid-data-paths", X, kPairwiseData, ""},
    {"pos-valid-label-data-paths", X, kPairwiseData, ""},
    {"neg-valid-label-data-paths", X, kPairwiseData, ""},
    {"pos-test-data-paths", X, kPairwiseData, ""},
    {"neg-test-data-paths", X, kPairwiseData, ""},
    {"pos-test-label-data-paths", X, kPairwiseData, ""},
    {"neg-test-label-data-paths", X, kPairwiseData, ""},
    {"train-data-weights", H, "NeoX's blending weights of train-data-paths"},
    {"valid-data-weights", H, "NeoX's blending weights of valid-data-paths"},
    {"test-data-weights", H, "NeoX's blending weights of test-data-paths"},
    {"weight-by-num-documents", H, "blending weights from the datasets' document counts"},
    {"weighted-sampler-alpha", H, "the smoothing exponent of weight-by-num-documents"},
    {"data-impl", N, "datasets are NeoX's mmap layout"},
    {"pack-impl", X, "sample packing other than NeoX's default", "\"packed\""},
    {"dataset-impl", X, "datasets other than NeoX's gpt2 kind", "\"gpt2\""},
    {"train-impl", X, "training other than the language-model loss (dpo, rm, kto)", "\"normal\""},
    {"dpo-fp32", N, kOnlyDpoKto},
    {"dpo-reference-free", N, kOnlyDpoKto},
    {"dpo-beta", N, kOnlyDpoKto},
    {"kto-fp32", N, kOnlyDpoKto},
    {"kto-desirable-weight", N, kOnlyDpoKto},
    {"kto-undesirable-weight", N, kOnlyDpoKto},
    {"kto-beta", N, kOnlyDpoKto},
    {"allow-chopped", N, "only used with pack-impl other than packed"},
    {"mmap-warmup", N, "datasets are memory-mapped on demand"},
    {"save", H, "the checkpoint directory"},
    {"s3-path", X, "checkpoint upload to S3", ""},
    {"s3-chunk-size", N, "only used with s3-path"},
    {"config-files", N, "NeoX stores the config files' texts in its checkpoints"},
    {"load", H, "the checkpoint directory to resume from"},
    {"checkpoint-validation-with-forward-pass", X, "a forward pass to validate saved checkpoints"},
    {"checkpoint-scale", H, "linear or log spacing of checkpoint-factor"},
    {"checkpoint-factor", H, "the checkpoint interval (linear) or ratio (log)"},
    {"extra-save-iters", H, "extra iterations to save at"},
    {"no-save-optim", X, "checkpoints without optimizer states"},
    {"no-save-rng", X, "checkpoints without random-number-generator states"},
    {"no-load-optim", H, "loads weights and schedule position, not optimizer state"},
    {"no-load-rng", X, "loading without random-number-generator states"},
    {"finetune", H, "loads weights only and starts at iteration 0"},
    {"batch-size", H, "train_micro_batch_size_per_gpu"},
    {"train-iters", H, "optimizer steps"},
    {"train-epochs", X, "training for a number of epochs (give train-iters)", ""},
    {"eval-iters", H, "validation batches per evaluation"},
    {"keep-last-n-checkpoints", H, "older checkpoints are deleted once a newer one is complete"},
    {"eval-interval", H, "iterations between evaluations"},
    {"split", H, "train, validation and test weights of data-path's documents"},
    {"vocab-file", H, "the tokenizer's vocabulary file"},
    {"merge-file", H, "the GPT-2 BPE tokenizer's merges file"},
    {"num-workers", N, "samples are read in the training thread"},
    {"exit-interval", H, "stops (after saving) at the first iteration divisible by it"},
    {"attention-dropout", H, "dropout on attention probabilities"},
    {"hidden-dropout", H, "dropout on the residual branches"},
    {"weight-decay", H, "the optimizer's weight decay"},
    {"checkpoint-activations", H, "recomputes each layer's activations in backward"},
    {"checkpoint-num-layers", H, "layers per activation checkpoint (only 1)"},
    {"deepspeed-activation-checkpointing", N,
     "chooses DeepSpeed's recomputation code; recomputation follows checkpoint-activations"},
    {"contiguous-checkpointing", N, "a CUDA memory layout of checkpointed activations"},
    {"checkpoint-in-cpu", N, "activations are in CPU memory here"},
    {"synchronize-each-layer", N, "a CUDA synchronisation after each layer"},
    {"profile-backward", N, "NVTX ranges around backward"},
    {"partition-activations", H, kPartitionActivations},
    {"clip-grad", H, "gradient_clipping"},
    {"hysteresis", H, "fp16.hysteresis"},
    {"dynamic-loss-scale", N, "NeoX derives it from loss-scale (none: dynamic), as here"},
    {"loss-scale", H, "fp16.loss_scale (none: dynamic)"},
    {"loss-scale-window", H, "fp16.loss_scale_window"},
    {"min-scale", H, "fp16.min_loss_scale"},
    {"char-level-ppl", X, "character-level perplexity"},
    {"use-mup", X, "maximal update parametrisation (muP)"},
    {"coord-check", X, "muP's coordinate check"},
    {"save-base-shapes", X, "saving muP's base shapes"},
    {"base-shapes-file", N, kMupKey},
    {"mup-init-scale", N, kMupKey},
    {"mup-attn-temp", N, kMupKey},
    {"mup-output-temp", N, kMupKey},
    {"mup-embedding-mult", N, kMupKey},
    {"mup-rp-embedding-mult", N, kMupKey},
    {"mup-width-scale", N, kMupKey},
    // NeoXArgsDeepspeedConfig (the DeepSpeed keys themselves are in the config policy table)
    {"deepspeed", N, "NeoX always runs DeepSpeed; here the engine always runs"},
    {"curriculum-seqlen", N, "NeoX sets it at run time for curriculum learning"},
    {"deepspeed-extra-args", H, "DeepSpeed keys merged into the DeepSpeed config"},
    // NeoXArgsDeepspeedRunner
    {"hostfile", N, kLauncherKey},
    {"include", N, kLauncherKey},
    {"exclude", N, kLauncherKey},
    {"num-nodes", N, kLauncherKey},
    {"num-gpus", N, kLauncherKey},
    {"master-port", N, kLauncherKey},
    {"master-addr", N, kLauncherKey},
    {"launcher", N, kLauncherKey},
    {"force-multi", N, kLauncherKey},
    {"autotuning-run", N,
     "an option of NeoX's deepy.py launcher; ds-launch takes --autotuning tune|run on its command "
     "line (docs/autotuning.md)"},
    {"no-ssh-check", N, kLauncherKey},
    {"comment", N, kLauncherKey},
    {"account", N, kLauncherKey},
    // Newer NeoX arguments (megatron/neox_arguments/neox_args.py) its documentation lacks.
    {"te-columnparallel", X, "NVIDIA Transformer Engine layers"},
    {"te-rowparallel", X, "NVIDIA Transformer Engine layers"},
    {"te-layernorm-mlp", X, "NVIDIA Transformer Engine layers"},
    {"te-mha", X, "NVIDIA Transformer Engine layers"},
    {"te-fp8-mha", X, "NVIDIA Transformer Engine's FP8 attention"},
    {"te-fp8-format", N, kTransformerEngineKey},
    {"te-fp8-wgrad", N, kTransformerEngineKey},
    {"te-fp8-amax-history-len", N, kTransformerEngineKey},
    {"te-fp8-amax-compute-algo", N, kTransformerEngineKey},
    {"te-fp8-margin", N, kTransformerEngineKey},
    {"serve-model-weights", X, "serving weights to an online data server"},
    {"weight-server-port", N, "only used with serve-model-weights"},
    {"online-dataserver-ips", N, "only used with online training (train-impl other than normal)"},
    {"online-dataserver-ports", N, "only used with online training (train-impl other than normal)"},
    {"wandb-run-name", N, kWandbKey},
    {"comet-experiment", N, kCometKey},
    {"peak-theoretical-tflops", N,
     "NeoX logs model FLOPs utilisation against it; the GPT trainer's flops profiler measures "
     "here"},
    {"z-loss", X, "the z-loss term", "0"},
    {"fp32-reinforce", N, "only used with train-impl reinforce (not implemented)"},
    {"kl-impl", N, "only used with train-impl reinforce (not implemented)"},
    {"kl-div-beta", N, "only used with train-impl reinforce (not implemented)"},
    {"reinforce-leave-one-out", N, "only used with train-impl reinforce (not implemented)"},
    // Older NeoX names, still in configs NeoX users have.
    {"moe-type", H,
     "megablocks (dropless, today's NeoX MoE) or deepspeed (DeepSpeed-MoE's gating)"},
    {"moe-loss-coeff", H, "moe-type deepspeed: the weight of the summed load-balancing loss"},
    {"moe-train-capacity-factor", H, "moe-type deepspeed: capacity factor in training"},
    {"moe-eval-capacity-factor", H, "moe-type deepspeed: capacity factor in evaluation"},
    {"moe-min-capacity", H, "moe-type deepspeed: the least capacity of an expert"},
    {"moe-token-dropping", H, "moe-type deepspeed: drop tokens past an expert's capacity"},
    {"moe-use-residual", H, "moe-type deepspeed: PR-MoE's dense MLP mixed with the experts"},
    {"moe-expert-parallel-size", H, "moe-type deepspeed: experts split over this many ranks"},
    {"moe-noisy-gate-policy", H, "moe-type deepspeed: None, Jitter or RSample (DeepSpeed's)"},
    {"moe-use-rts", H, "moe-type deepspeed: random token selection on overflow (top-1)"},
    {"create-moe-param-group", N, "the engine keeps expert parameters in their own places"},
    {"use-tutel", N, "Tutel's CUDA kernels for DeepSpeed-MoE; the maths is the same"},
    {"moe-glu", X, "gated experts in NeoX's megablocks MoE"},
    {"enable-expert-tensor-parallelism", X, "experts sliced over the model-parallel group"},
    {"rms-norm", H, "norm: rmsnorm"},
    {"geglu", H, "activation: geglu"},
    {"sinusoidal-pos-emb", H, "pos-emb: sinusoidal"},
    {"save-interval", H, "checkpoint-factor with checkpoint-scale linear"},
    {"deepspeed-config", H, "a DeepSpeed JSON file whose keys are read as if inline"},
    {"contigious-checkpointing", N, "a CUDA memory layout of checkpointed activations"},
    {"ddp-impl", N, "data parallelism is the ZeRO engine's"},
    {"cpu-torch-adam", N, "CPU-Adam is used for Adam"},
    {"apply-residual-connection-post-layernorm", X, "post-norm residual connections"},
    {"openai-gelu", X, "the exact-erf GeLU"},
    {"onebitadam", X, "1-bit Adam"},
    {"cpu-optimizer", X, "NeoX's CPU optimizer switch"},
    {"distribute-checkpointed-activations", H, kPartitionActivations},
    {"rpe", X, "relative position embeddings"},
    {"rpe-causal", X, "relative position embeddings"},
    {"sparsity", X, "sparse attention", ""},
    {"mask-prob", X, "BERT's masking"},
    {"reset-position-ids", X, "position ids restarting at each document"},
    {"reset-attention-mask", X, "attention masked at document boundaries"},
    {"ict-head-size", X, "Megatron's ICT retrieval model", ""},
    {"ict-load", X, "Megatron's ICT retrieval model", ""},
    {"bert-load", X, "Megatron's BERT", ""},
    {"titles-data-path", X, "Megatron's ICT retrieval model", ""},
    {"query-in-block-prob", X, "Megatron's ICT retrieval model", ""},
    {"use-one-sent-docs", X, "Megatron's ICT retrieval model"},
    {"report-topk-accuracies", X, "Megatron's ICT retrieval model", ""},
    {"faiss-use-gpu", X, "Megatron's ICT retrieval model"},
    {"block-data-path", X, "Megatron's ICT retrieval model", ""},
    {"indexer-batch-size", X, "Megatron's ICT retrieval model", ""},
    {"indexer-log-interval", X, "Megatron's ICT retrieval model", ""},
};

}  // namespace

const std::vector<NeoxKeyRule>& neoxKeyTable() { return kTable; }

const std::vector<NeoxDeepSpeedKey>& neoxDeepSpeedKeys() {
  static const std::vector<NeoxDeepSpeedKey> keys = {
      {"sequence_parallel_size",
       "DeepSpeed-Ulysses: consecutive ranks share each sample's positions, attention all-to-all "
       "to head-split and back; heads, kv heads and seq-length must divide by it; with data "
       "parallelism and ZeRO, not with model- or pipe-parallel-size above 1"}};
  return keys;
}

const NeoxKeyRule* findNeoxKey(std::string_view hyphenated) {
  auto it = std::find_if(kTable.begin(), kTable.end(),
                         [&](const NeoxKeyRule& r) { return r.name == hyphenated; });
  return it == kTable.end() ? nullptr : &*it;
}

namespace {

std::vector<nlohmann::json> offValuesOf(const NeoxKeyRule& rule) {
  std::vector<nlohmann::json> out;
  std::string_view rest = rule.offValues;
  while (!rest.empty()) {
    const size_t bar = rest.find('|');
    out.push_back(nlohmann::json::parse(rest.substr(0, bar)));
    rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
  }
  return out;
}

}  // namespace

bool neoxKeyIsOff(const NeoxKeyRule& rule, const nlohmann::json& value) {
  if (value.is_null()) return true;
  for (const nlohmann::json& off : offValuesOf(rule)) {
    if (off == value) return true;
    if (off.is_number() && value.is_number() && off.get<double>() == value.get<double>())
      return true;
  }
  return false;
}

std::string neoxKeyRefusal(const NeoxKeyRule& rule, const nlohmann::json& value) {
  std::string fix = "remove it";
  const std::vector<nlohmann::json> offs = offValuesOf(rule);
  for (size_t i = 0; i < offs.size(); ++i)
    fix += (i == 0 ? " or set it to " : " or ") +
           (offs[i].is_string() ? offs[i].get<std::string>() : offs[i].dump());
  return std::string(rule.name) + ": " + std::string(rule.note) +
         " is not implemented by this trainer (given " + value.dump() + "); " + fix;
}

}  // namespace ds::runtime
