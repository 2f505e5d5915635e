"""lab.prompts: the prompt sets per task kind on the bundled pair."""

from __future__ import annotations

import numpy as np
import pytest

from lab.prompts import copy_heavy_prompts, edit_prompts, record_prompts


def test_workload_prompts_fit_the_context(pair):
    limit = pair.target.config.max_position_embeddings
    for prompts in (copy_heavy_prompts(pair), edit_prompts(pair), record_prompts(pair)):
        assert prompts and all(len(pair.encode(p)) + 128 <= limit for p in prompts)
    assert record_prompts(pair)[0].startswith('{"speaker": ')


def test_arena_prompts_per_task(pair):
    from lab.prompts import ARENA_TASKS, arena_prompts, held_out_prompts

    assert arena_prompts(pair, "prose") == held_out_prompts()
    assert len(arena_prompts(pair, "copy_edit")) == len(arena_prompts(pair, "copy")) == 8
    assert len(arena_prompts(pair, "structured")) >= 4
    assert set(ARENA_TASKS) == {"prose", "copy_edit", "structured", "copy"}
    with pytest.raises(ValueError, match="task must be one of"):
        arena_prompts(pair, "poetry")


def test_prompt_lists_are_checked():
    from lab.prompts import check_prompts

    with pytest.raises(TypeError, match="wrap it in a list"):
        check_prompts("ROMEO.")
    with pytest.raises(ValueError, match="non-empty"):
        check_prompts([])
    with pytest.raises(TypeError, match="texts must be a list of strings"):
        check_prompts([1], "texts")
    assert check_prompts(("a", "b")) == ["a", "b"]


def test_prompt_builders_check_their_counts(pair):
    from lab.prompts import copy_heavy_prompts, record_prompts

    for repeats in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="repeats must be an integer in \\[1, 100\\]"):
            copy_heavy_prompts(pair, repeats=repeats)
    for records in (0, 1):  # one record and the next one's opening is not a prompt: it used to return []
        with pytest.raises(ValueError, match="records must be an integer >= 2"):
            record_prompts(pair, records=records)
    with pytest.raises(TypeError, match="texts must be a list of strings, got one str"):
        copy_heavy_prompts(pair, "ROMEO.\nBut soft")
    two = copy_heavy_prompts(pair, ["ROMEO.\nBut soft, what light\n"], repeats=np.int64(2))
    assert len(two) == 1 and two[0].count("ROMEO.\nBut soft, what light\n\n\n") == 2
    assert len(record_prompts(pair, records=np.int64(2))) > len(record_prompts(pair, records=4)) > 0


# ---------------------------------------------------------------------------------------------------------
# The real pair's conversations: multi-turn edits and agent loops (lab/assets/smollm2-135m/transcripts.json).


def test_transcripts_are_the_target_s_conversations_with_provenance():
    from lab.prompts import CONVERSATION_TASKS, transcripts
    from lab.training.transcripts import CONVERSATIONS

    data = transcripts()
    assert data["provenance"]["decoding"].startswith("greedy, float32")
    assert [(t["kind"], t["name"]) for t in data["transcripts"]] == [(c["kind"], c["name"]) for c in CONVERSATIONS]
    for transcript, conversation in zip(data["transcripts"], CONVERSATIONS):
        assert transcript["kind"] in CONVERSATION_TASKS
        roles = [m["role"] for m in transcript["messages"]]
        users = [m["content"] for m in transcript["messages"] if m["role"] == "user"]
        assert users == conversation["turns"]  # the builder's turns, verbatim
        # user and assistant alternate, every user turn answered, a system message first for an agent
        assert roles == ["system"] * ("system" in conversation) + ["user", "assistant"] * len(users)
        assert len(transcript["answer_tokens"]) == len(users) and all(0 < n <= 80 for n in
                                                                       transcript["answer_tokens"])


def test_conversation_requests_quote_earlier_answers_turn_by_turn():
    from lab.prompts import conversation_requests, transcripts

    for kind in ("multi_turn", "agent"):
        requests = conversation_requests(kind)
        firsts = [t["messages"][int(t["messages"][0]["role"] == "system")]["content"]
                  for t in transcripts()["transcripts"] if t["kind"] == kind]
        assert len(firsts) == 4 and len(requests) == 12  # 4 conversations x their 2nd, 3rd and 4th user turns
        for i, request in enumerate(requests):
            assert request[-1]["role"] == "user"
            assert sum(m["role"] == "assistant" for m in request) == 1 + i // 4  # 2nd turn quotes 1 answer, ...
            assert request[int(request[0]["role"] == "system")]["content"] == firsts[i % 4]  # round robin
    with pytest.raises(ValueError, match=r"task must be one of \('multi_turn', 'agent'\), got 'chat'"):
        conversation_requests("chat")


def test_assistant_turns_finds_the_quoted_answers(smollm2_pair, pair):
    from lab.prompts import ARENA_TASKS, CHAT_TASKS, CONVERSATION_TASKS, arena_prompts, arena_tasks, assistant_turns

    chat = smollm2_pair
    messages = [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi there."},
                {"role": "user", "content": "Again, louder."}, {"role": "assistant", "content": "HI THERE!"},
                {"role": "user", "content": "Once more."}]
    ids = chat.encode_chat(messages)
    found = assistant_turns(chat, ids)
    # each answer with its end of turn (<|im_end|>, id 2); the open assistant turn at the end is not one
    assert [chat.decode(t) for t in found] == ["Hi there.<|im_end|>", "HI THERE!<|im_end|>"]
    assert assistant_turns(chat, chat.encode_chat("Say hi.")) == []
    assert assistant_turns(pair, pair.encode("ROMEO.\nBut soft")) == []  # no chat template: nothing to find
    assert arena_tasks(chat) == CHAT_TASKS + CONVERSATION_TASKS and arena_tasks(pair) == ARENA_TASKS
    request = arena_prompts(chat, "agent")[0]
    assert isinstance(request, list) and request[0]["role"] == "system" and "Tool result" in request[0]["content"]



def test_assistant_turns_reads_the_end_of_turn_from_the_template(smollm2_pair):
    """A chat tokenizer whose eos is not the token that closes a turn (here "<|endoftext|>", id 0, while the template
    ends each message with "<|im_end|>", id 2) used to raise a bare "ValueError: 0 is not in list"; the suffix
    drafter calls assistant_turns at every reset of such a pair. The end of turn now comes from the template."""
    import copy
    import dataclasses

    from lab.prompts import assistant_turns
    from lab.registry import make_drafter

    tokenizer = copy.deepcopy(smollm2_pair.tokenizer)
    tokenizer.eos_token = "<|endoftext|>"
    other = dataclasses.replace(smollm2_pair, tokenizer=tokenizer)
    assert (other.eos_token_id, smollm2_pair.eos_token_id) == (0, 2)
    assert assistant_turns(other, other.encode_chat("hi")) == []
    messages = [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi there."},
                {"role": "user", "content": "Again, louder."}, {"role": "assistant", "content": "HI THERE!"},
                {"role": "user", "content": "Once more."}]
    found = assistant_turns(other, other.encode_chat(messages))
    assert [other.decode(t) for t in found] == ["Hi there.<|im_end|>", "HI THERE!<|im_end|>"]
    assert found == assistant_turns(smollm2_pair, smollm2_pair.encode_chat(messages))
    make_drafter("suffix", other, 4).reset(other.encode_chat(messages))  # no error at reset


def test_edit_prompts_change_whole_words_only(pair):
    """The word changes of EDITS used to match inside words: " you" in "your" and "young", "sir" in "desire"
    ('I thank theer demadame, sir; & you, young lord.'). Each now changes the first whole word only."""
    passage = "HAMLET.\nI thank your desire, sir; and you, young lord.\n"
    prompt = edit_prompts(pair, [passage])[0]
    edited = "HAMLET.\nI thank thy desire, madam; & thee, young lord.\n"
    assert prompt == passage + "\n\n" + edited + "\n\n" + edited + "\n\n" + "HAMLET."  # its first 4 tokens
    from lab.prompts import _edit

    assert _edit("my lords and my lord", "my lord", "my liege") == "my lords and my liege"
    assert _edit("my lords and my lord", "my lords", "my lieges") == "my lieges and my lord"
    assert _edit("yours, young", " you", " thee") == "yours, young"  # no whole word: unchanged
    assert _edit("a.b a+b", "a+b", "c") == "a.b c"  # regex characters are literal


def test_encode_prompts_refuses_one_prompt_given_bare(pair):
    """A bare string was encoded as one prompt per character."""
    from lab.prompts import encode_prompts

    with pytest.raises(TypeError, match=r"one str 'To be, or not to be': wrap it in a list"):
        encode_prompts(pair, "To be, or not to be")
    with pytest.raises(TypeError, match=r"wrap one message list in a list"):
        encode_prompts(pair, {"role": "user", "content": "Hi"})
    with pytest.raises(TypeError, match="got int"):
        encode_prompts(pair, 3)
    assert encode_prompts(pair, ("To be",)) == [pair.encode("To be")]
    assert encode_prompts(pair, (p for p in ["To be"])) == [pair.encode("To be")]


def test_every_edit_prompt_holds_an_edit(pair):
    """Three held-out passages held none of EDITS' words, so their "edit" request was the copy request itself (a
    learner's run of lesson 08 on the Shakespeare pair); FALLBACK_EDITS gives each a change."""
    from lab.prompts import FALLBACK_EDITS

    edits, copies = edit_prompts(pair), copy_heavy_prompts(pair)
    assert all(edit != copy for edit, copy in zip(edits, copies))
    passage, edited = (part.strip() for part in edits[2].split("\n\n")[:2])
    assert passage.replace("good", "noble", 1) == edited and FALLBACK_EDITS[0] == ("good", "noble")


def test_prompt_helpers_name_a_preset_name_passed_as_the_pair(pair):
    """arena_prompts("smollm2-135m", "chat") raised an AttributeError about has_chat_template."""
    from lab.prompts import arena_prompts, arena_tasks, encode_prompts, pair_tasks

    for call in (lambda: arena_prompts("smollm2-135m", "chat"), lambda: pair_tasks("shakespeare"),
                 lambda: arena_tasks(None), lambda: encode_prompts(None, ["x"]), lambda: edit_prompts("shakespeare"),
                 lambda: copy_heavy_prompts("shakespeare")):
        with pytest.raises(TypeError, match=r"takes a model pair as pair \(lab.models.load_pair\(...\)\)"):
            call()
    with pytest.raises(TypeError, match="pass load_pair\\('shakespeare'\\)"):
        pair_tasks("shakespeare")
    with pytest.raises(TypeError, match="task must be one task name"):
        arena_prompts(pair, ["prose"])  # "unhashable type: 'list'"
    with pytest.raises(ValueError, match=r"repeats must be an integer in \[1, 100\]"):
        copy_heavy_prompts(pair, repeats=10**6)  # built 892 MB of text


def test_assistant_turns_and_context_problem_check_what_they_read(smollm2_pair, pair):
    from lab.prompts import assistant_turns, context_problem

    ids = smollm2_pair.encode_chat("hi")
    with pytest.raises(TypeError, match="prompt_ids must hold integer token ids, got float"):
        assistant_turns(smollm2_pair, [t + 0.7 for t in ids])  # truncated to ids before
    with pytest.raises(TypeError, match="prompt_ids must be token ids, got text"):
        assistant_turns(smollm2_pair, "12")
    with pytest.raises(ValueError, match="encoded must hold at least one encoded prompt"):
        context_problem(pair, [], 10)  # "max() arg is an empty sequence"
    with pytest.raises(ValueError, match="max_new_tokens must be an integer >= 0"):
        context_problem(pair, [[1, 2]], -3)
    assert context_problem(pair, [[1, 2]], 3) is None


@pytest.mark.parametrize("prompts", [{"greeting": "Hello"}, {"Hello", "Bye"}])
def test_check_prompts_refuses_a_dict_or_a_set(prompts):
    """A dict's keys were taken as the prompts."""
    from lab.prompts import check_prompts

    with pytest.raises(TypeError, match=r"prompts must be a list of strings, got a (dict|set): pass a list"):
        check_prompts(prompts)
    assert check_prompts(("Hello", "Bye")) == ["Hello", "Bye"]
