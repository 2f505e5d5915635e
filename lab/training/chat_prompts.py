"""The training prompts for drafts of the real pair (``"smollm2-135m"``): chat, code, structured-output and copy/edit
requests, built offline from templates, the Python standard library's own sources and the Shakespeare corpus.

Drafts learn the target's answers to these (:mod:`lab.training.chat_data`). The held-out prompts the bench and the
arena use (:func:`lab.prompts.chat_prompts`) are written apart, on topics these templates never draw, and
:func:`training_prompts` drops any prompt that equals one of them.
"""
from __future__ import annotations

import ast
import functools
import random
import sysconfig
from pathlib import Path

__all__ = ["TASK_KINDS", "training_prompts", "stdlib_functions"]

TASK_KINDS = ("chat", "code", "structured", "copy_edit")
"""The kinds of request, in the bench's and the arena's order."""

_TOPICS = (
    "photosynthesis", "the water cycle", "black holes", "volcanoes", "the Roman Empire", "the printing press",
    "vaccines", "plate tectonics", "the French Revolution", "electric cars", "honeybees", "the moon landing",
    "coral reefs", "inflation", "democracy", "the internet", "solar panels", "earthquakes", "the immune system",
    "climate change", "the Great Wall of China", "compound interest", "rainbows", "the human heart", "glaciers",
    "the Renaissance", "recycling", "tides", "DNA", "the stock market", "airplanes", "penguins", "deserts",
    "the Industrial Revolution", "gravity", "the Olympic Games", "chess", "coffee", "tea", "bread baking",
    "the piano", "jazz", "the Amazon rainforest", "meditation", "sleep", "friendship", "museums", "libraries",
    "bicycles", "trains", "the ocean", "mountains", "rivers", "birds migrating", "wolves", "elephants", "octopuses",
    "the periodic table", "magnets", "lightning", "clouds", "the seasons", "the solar system", "Mars", "comets",
    "ancient Egypt", "the Vikings", "the Silk Road", "castles", "pirates", "gardening", "composting", "bees",
    "volunteering", "public speaking", "learning a language", "budgeting", "exercise", "nutrition", "hiking",
    "camping", "photography", "painting", "poetry", "theatre", "film", "robots", "computers", "smartphones",
    "batteries", "wind power", "nuclear energy", "bridges", "skyscrapers", "maps", "clocks", "money", "taxes",
)
_ACTIVITIES = (
    "staying focused while studying", "saving money", "sleeping better", "writing a good email", "learning to cook",
    "starting to run", "keeping a plant alive", "preparing for an interview", "travelling on a budget",
    "making friends in a new city", "reducing stress", "reading more books", "organising a desk",
    "drinking more water", "learning to code", "writing a cover letter", "giving feedback", "planning a trip",
    "cleaning a kitchen", "taking notes in class", "staying safe online", "choosing a laptop", "training a puppy",
    "painting a room", "starting a garden", "managing time", "speaking in public", "remembering names",
)
_STORY_THINGS = (
    "a lost robot", "a brave mouse", "a lighthouse keeper", "a dragon who is afraid of fire", "a talking tree",
    "a girl who finds a map", "an old clockmaker", "a cat on a boat", "a snowman in summer", "a tiny astronaut",
    "a forgotten umbrella", "a king without a crown", "a fox and a crow", "a river that sings", "a kind giant",
)
_CODE_TASKS = (
    "reverses a string", "checks whether a number is prime", "returns the factorial of n", "counts the vowels in a "
    "string", "returns the largest element of a list", "merges two sorted lists", "removes duplicates from a list",
    "computes the n-th Fibonacci number", "checks whether a string is a palindrome", "converts Celsius to Fahrenheit",
    "returns the sum of the digits of an integer", "flattens a nested list", "counts the words in a sentence",
    "returns the greatest common divisor of two numbers", "sorts a list of dictionaries by a key",
    "reads a text file and returns its lines", "returns the average of a list of numbers",
    "finds the index of an item with binary search", "capitalises every word in a string",
    "returns the second largest number in a list", "checks whether two strings are anagrams",
    "returns the transpose of a matrix", "counts how often each character appears", "converts a list to a dictionary",
    "returns the squares of the even numbers in a list", "validates an email address with a regular expression",
    "returns the n largest items of a list", "computes the area of a circle", "checks whether a year is a leap year",
    "splits a list into chunks of size n", "returns the common elements of two lists", "implements bubble sort",
    "converts a binary string to an integer", "returns the longest word in a sentence", "rotates a list by k places",
)
_LANGUAGES = ("Python", "Python", "Python", "JavaScript", "C", "Java", "Rust", "Go", "SQL", "Bash")
_RECORD_THINGS = (
    ("a book", "title, author, year and genre"), ("a movie", "title, director, year and rating"),
    ("a person", "name, age, city and job"), ("a car", "make, model, year and colour"),
    ("a city", "name, country, population and language"), ("a recipe", "name, ingredients and minutes"),
    ("a product", "name, price, stock and category"), ("a song", "title, artist, album and length"),
    ("a student", "name, grade, subjects and average"), ("a planet", "name, moons, diameter and type"),
    ("an animal", "name, habitat, diet and lifespan"), ("a country", "name, capital, currency and continent"),
    ("a laptop", "brand, memory, storage and price"), ("an event", "name, date, place and guests"),
)
_STRUCTURES = ("a JSON object", "a JSON object", "a YAML document", "a Markdown table", "a CSV line with a header",
               "a Python dictionary")
_LIST_THINGS = ("fruits", "colours", "programming languages", "European capitals", "musical instruments",
                "sports", "vegetables", "mammals", "board games", "planets", "rivers", "trees", "gemstones")
_EDIT_VERBS = (
    ("Repeat the following text exactly, word for word:", "copy"),
    ("Copy this passage without changing anything:", "copy"),
    ("Rewrite the following text in all capital letters:", "upper"),
    ("Fix the spelling mistakes in this text and return the corrected text only:", "typos"),
    ("Add a docstring to this function and reply with the whole function:", "code"),
    ("Add type hints to this function and reply with the whole function:", "code"),
    ("Rename the function below to `helper` and reply with the whole code:", "code"),
    ("Add a comment above every line of this function:", "code"),
    ("Translate the following Python function to JavaScript:", "code"),
    ("Explain what this code does, line by line:", "code"),
    ("Summarise this passage in one sentence:", "prose"),
    ("Quote the first two lines of this passage, then explain them:", "prose"),
)


def stdlib_functions(limit: int = 2000, min_lines: int = 4, max_lines: int = 18, seed: int = 0) -> list[str]:
    """Up to ``limit`` function definitions of ``min_lines``-``max_lines`` lines from the Python standard library's
    own source files (PSF licence), in a reproducible random order (``seed``): code that ships with every Python."""
    found = list(_stdlib_functions(min_lines, max_lines))
    random.Random(seed).shuffle(found)
    return found[:limit]


@functools.lru_cache(maxsize=4)
def _stdlib_functions(min_lines: int, max_lines: int) -> tuple[str, ...]:
    """Every top-level function of that length in the standard library's ``*.py`` files, in file order (parsed
    once per process: about 200 files)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    found = []
    for path in sorted(root.glob("*.py")):
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        lines = source.splitlines()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.col_offset == 0 and node.end_lineno:
                body = lines[node.lineno - 1:node.end_lineno]
                if min_lines <= len(body) <= max_lines and all(len(line) < 100 for line in body):
                    found.append("\n".join(body))
    return tuple(found)


def _typos(text: str, rng: random.Random) -> str:
    """``text`` with about one word in eight misspelt (two neighbouring letters swapped)."""
    words = text.split(" ")
    for i, word in enumerate(words):
        if len(word) > 4 and rng.random() < 0.125:
            j = rng.randrange(1, len(word) - 2)
            words[i] = word[:j] + word[j + 1] + word[j] + word[j + 2:]
    return " ".join(words)


def _passages(count: int, rng: random.Random) -> list[str]:
    """``count`` short Shakespeare passages (2-5 lines) from the cached corpus (downloaded once by
    :func:`lab.training.corpus.fetch_corpus`)."""
    from lab.training.corpus import fetch_corpus

    lines = [line.strip() for _, text in fetch_corpus() for line in text.splitlines()]
    lines = [line for line in lines if 20 < len(line) < 90 and not line.isupper()]
    out = []
    for _ in range(count):
        start, size = rng.randrange(len(lines) - 6), rng.randint(2, 5)
        out.append("\n".join(lines[start:start + size]))
    return out


def training_prompts(count: int = 4000, seed: int = 0, exclude=()) -> list[tuple[str, str]]:
    """``count`` training requests as ``(kind, user message)`` pairs, a quarter of each kind of
    :data:`TASK_KINDS`, shuffled reproducibly (``seed``); any message in ``exclude`` (the held-out prompts) is
    dropped, so a few fewer may come back."""
    rng = random.Random(seed)
    functions = stdlib_functions(seed=seed)
    passages = _passages(count, rng)
    per_kind = count // len(TASK_KINDS)

    # each kind: a form drawn first, then what fills it (the draws' order fixes the committed data's prompts)
    chat_forms = (lambda topic: f"What is {topic}? Explain it simply.",
                  lambda topic: f"Give me {rng.randint(3, 6)} tips for {rng.choice(_ACTIVITIES)}.",
                  lambda topic: f"Write a short story about {rng.choice(_STORY_THINGS)}.",
                  lambda topic: f"Tell me three interesting facts about {topic}.",
                  lambda topic: f"Write a short poem about {topic}.",
                  lambda topic: f"How would you explain {topic} to a ten-year-old?")
    code_forms = (lambda: f"Write a {rng.choice(_LANGUAGES)} function that {rng.choice(_CODE_TASKS)}.",
                  lambda: f"Write a Python function that {rng.choice(_CODE_TASKS)}, with a docstring and an example.",
                  lambda: f"What does this Python function do?\n\n```python\n{rng.choice(functions)}\n```",
                  lambda: f"Write a unit test for this function:\n\n```python\n{rng.choice(functions)}\n```")

    def chat():
        form = rng.choice(chat_forms)
        return form(rng.choice(_TOPICS))

    def code():
        return rng.choice(code_forms)()

    def structured():
        form = rng.randrange(3)
        if form == 0:
            thing, fields = rng.choice(_RECORD_THINGS)
            return f"Describe {thing} as {rng.choice(_STRUCTURES)} with the fields {fields}."
        if form == 1:
            return f"List {rng.randint(3, 8)} {rng.choice(_LIST_THINGS)} as a JSON array of strings."
        thing, fields = rng.choice(_RECORD_THINGS)
        return f"Make a Markdown table of {rng.randint(2, 4)} examples of {thing[2:].lstrip()} with {fields}."

    def copy_edit():
        verb, needs = rng.choice(_EDIT_VERBS)
        if needs == "code":
            return f"{verb}\n\n```python\n{rng.choice(functions)}\n```"
        passage = passages.pop()
        if needs == "typos":
            passage = _typos(passage, rng)
        return f"{verb}\n\n{passage}"

    makers = {"chat": chat, "code": code, "structured": structured, "copy_edit": copy_edit}
    excluded = set(exclude)
    prompts = [(kind, makers[kind]()) for kind in TASK_KINDS for _ in range(per_kind)]
    prompts = [(kind, text) for kind, text in prompts if text not in excluded]
    rng.shuffle(prompts)
    return prompts
