# SPDX-FileCopyrightText: Copyright (c) 2022-2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
# http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
#
# Field skeleton of tensorrt_llm/llmapi/llm_args.py in NVIDIA/TensorRT-LLM at commit
# 0004396720054fd8e205cbf616f21f0b57c6b412 (see tests/data/engines/README.md): the speculative-decoding
# config classes and the SpeculativeConfig union, each class with its public annotated fields in source
# order as `name: <annotation>` (defaults, docstrings, comments, methods and PrivateAttr fields dropped;
# a field declared with Field(init=False) keeps that marker). tools/fetch_engine_sources.py --trtllm-file
# rebuilds this skeleton from a full llm_args.py and compares.


class DecodingBaseConfig(StrictBaseModel):
    max_draft_len: Optional[NonNegativeInt]
    max_total_draft_tokens: Optional[int]
    speculative_model: Optional[Union[str, Path]]
    max_concurrency: Optional[PositiveInt]
    draft_len_schedule: Optional[dict[int, int]]
    load_format: Optional[str]
    acceptance_rate_window_size: Optional[NonNegativeInt]
    acceptance_rate_threshold: Optional[float]
    use_rejection_sampling: bool
    allow_advanced_sampling: bool
    advanced_sampling_mode: AdvancedSamplingMode
    enable_penalty: bool


class EagleDecodingConfig(DecodingBaseConfig):
    decoding_type: Literal['Eagle']
    eagle_choices: Optional[List[List[int]]]
    greedy_sampling: Optional[bool]
    posterior_threshold: Optional[float]
    use_dynamic_tree: Optional[bool]
    dynamic_tree_max_topK: Optional[int]
    num_eagle_layers: Optional[int]
    max_non_leaves_per_layer: Optional[int]
    eagle3_one_model: Optional[bool]
    eagle3_layers_to_capture: Optional[Set[int]]
    eagle3_model_arch: Literal['llama3', 'mistral_large3']


class SAEnhancerConfig(StrictBaseModel):
    threshold: PositiveInt
    enable_global_pool: bool


class Eagle3DecodingConfig(EagleDecodingConfig):
    decoding_type: Literal['Eagle3']
    sa_config: Optional[SAEnhancerConfig]


class SaveHiddenStatesDecodingConfig(DecodingBaseConfig):
    decoding_type: Literal['SaveState']
    output_directory: str
    write_interval: int
    file_prefix: str
    eagle3_layers_to_capture: Optional[Set[int]]
    max_total_draft_tokens: Optional[int] = Field(init=False)
    eagle_choices: Optional[List[List[int]]] = Field(init=False)


class UserProvidedDecodingConfig(DecodingBaseConfig):
    decoding_type: Literal['User_Provided']
    drafter: object
    resource_manager: object


class NGramDecodingConfig(DecodingBaseConfig):
    decoding_type: Literal['NGram']
    max_matching_ngram_size: PositiveInt
    is_keep_all: bool
    is_use_oldest: bool
    is_public_pool: bool


class SADecodingConfig(DecodingBaseConfig):
    decoding_type: Literal['SA']
    max_matching_ngram_size: int
    enable_global_pool: bool
    global_pool_size: Optional[PositiveInt]


class DraftTargetDecodingConfig(DecodingBaseConfig):
    decoding_type: Literal['Draft_Target']


class MTPDecodingConfig(DecodingBaseConfig):
    decoding_type: Literal['MTP']
    use_relaxed_acceptance_for_thinking: bool
    relaxed_topk: PositiveInt
    relaxed_delta: NonNegativeFloat
    use_mtp_vanilla: bool
    mtp_eagle_one_model: bool
    use_dynamic_tree: bool
    dynamic_tree_max_topK: Optional[int]
    sa_config: Optional[SAEnhancerConfig]
    num_nextn_predict_layers: Optional[int] = Field(init=False)
    begin_thinking_phase_token: NonNegativeInt
    end_thinking_phase_token: NonNegativeInt


class PARDDecodingConfig(DecodingBaseConfig):
    mask_token_id: Optional[int]
    decoding_type: Literal['PARD']
    sa_config: Optional[SAEnhancerConfig]


class DFlashDecodingConfig(DecodingBaseConfig):
    mask_token_id: Optional[int]
    target_layer_ids: Optional[List[int]]
    decoding_type: Literal['DFlash']
    attention_backend: Literal['VANILLA', 'TRTLLM']


class DSparkDecodingConfig(DecodingBaseConfig):
    mask_token_id: Optional[int]
    target_layer_ids: Optional[List[int]]
    block_size: Optional[PositiveInt]
    markov_rank: Optional[int]
    markov_head_type: Optional[Literal['vanilla', 'gated', 'rnn']]
    decoding_type: Literal['DSpark']
    attention_backend: Literal['VANILLA', 'TRTLLM']


class AutoDecodingConfig(DecodingBaseConfig):
    decoding_type: Literal['AUTO']


SpeculativeConfig: TypeAlias = Annotated[Union[DraftTargetDecodingConfig, Eagle3DecodingConfig, EagleDecodingConfig, MTPDecodingConfig, NGramDecodingConfig, SADecodingConfig, UserProvidedDecodingConfig, SaveHiddenStatesDecodingConfig, PARDDecodingConfig, DFlashDecodingConfig, DSparkDecodingConfig, AutoDecodingConfig], Field(discriminator='decoding_type')]
