"""The smoke profile's small synthetic world (standard library only).

A deterministic plain-text corpus (NOT chat: no questions, no answers, no
"user"/"assistant") about 32 everyday topics, and request-style prompts about
the same topics. Everything is a pure function of the seeds below, so every
machine builds byte-identical data.

  topics()        [{"noun", "plural", "words": [6 topic words]}]
  corpus(seed)    a list of documents (strings): paragraphs of sentences,
                  separated by "\\n"; a paragraph mostly keeps to one topic
                  and the next paragraph often continues it
  prompts()       {"train": [...], "public": [...], "heldout": [...]}: the
                  request templates 0-7 go to training, 8-9 to the public
                  validation prompts, 10-13 to the held-out ones
"""

import random

# noun, plural, six words that belong to the topic (distinct across topics)
TOPICS = [
    ("river", "rivers", "water fish bridge boat bank current"),
    ("garden", "gardens", "flowers soil seeds roses weeds shovel"),
    ("kitchen", "kitchens", "oven stove pans knives recipe spices"),
    ("train", "trains", "station rails tickets engine carriage platform"),
    ("forest", "forests", "trees moss deer leaves branches owls"),
    ("library", "libraries", "books shelves readers silence librarian novels"),
    ("ocean", "oceans", "waves salt whales tides coral sailors"),
    ("city", "cities", "streets buildings traffic crowds towers markets"),
    ("school", "schools", "teachers pupils lessons homework classroom exams"),
    ("winter", "winters", "snow ice frost scarves sledges blizzard"),
    ("bread", "breads", "flour yeast dough crust bakery loaf"),
    ("music", "musics", "songs melody rhythm guitar singers concert"),
    ("cat", "cats", "whiskers paws fur kittens purring mice"),
    ("dog", "dogs", "leash bones puppies barking collar walks"),
    ("mountain", "mountains", "peaks climbers cliffs summit valleys rocks"),
    ("farm", "farms", "cows barn tractor wheat harvest chickens"),
    ("hospital", "hospitals", "doctors nurses patients medicine ward surgery"),
    ("computer", "computers", "keyboard screen software programs memory mouse"),
    ("bicycle", "bicycles", "pedals wheels saddle chain helmet brakes"),
    ("island", "islands", "beaches palms harbor ferry lagoon sand"),
    ("desert", "deserts", "dunes camels heat cactus oasis dust"),
    ("market", "marketplaces", "stalls vendors fruit bargains baskets coins"),
    ("castle", "castles", "walls knights moat gate kings dragons"),
    ("storm", "storms", "thunder lightning rain wind clouds hail"),
    ("museum", "museums", "sculptures statues visitors exhibits galleries artists"),
    ("coffee", "coffees", "beans cups espresso milk roast cafe"),
    ("airport", "airports", "planes pilots runway luggage passengers flights"),
    ("bee", "bees", "honey hive pollen queen wax nectar"),
    ("football", "footballs", "goals players referee stadium fans pitch"),
    ("painting", "paintings", "canvas brushes colors portrait easel frames"),
    ("moon", "moons", "craters orbit night astronauts stars phases"),
    ("village", "villages", "cottages chapel neighbors square well lanes"),
]

# Frames put a topic's noun and its words into sentences. {n} noun, {p} plural,
# {a} {b} two different topic words.
FRAMES = [
    "the {n} has a lot of {a} .",
    "people often talk about the {a} of the {n} .",
    "every {n} needs {a} and {b} .",
    "a good {n} is known for its {a} .",
    "we saw {a} and {b} near the {n} .",
    "the {a} in the {n} were beautiful this year .",
    "many {p} have {a} .",
    "there is always {a} around a {n} .",
    "she wrote a short story about {a} and the {n} .",
    "most {p} depend on {a} .",
    "the old {n} was full of {a} .",
    "he likes the {n} because of the {b} .",
    "{a} and {b} make the {n} special .",
    "you can find {a} in almost every {n} .",
    "the {n} looked different after the {a} changed .",
    "my friend visited the {n} to see the {a} .",
]

# Generic sentences with no topic (noise inside paragraphs, and filler).
FILLERS = [
    "it was a quiet morning .",
    "nobody knew what to say .",
    "the day was long and warm .",
    "we went home early .",
    "that is a common idea .",
    "things changed slowly over the years .",
    "many people agree with this .",
    "it is hard to explain why .",
    "the weather was nice today .",
    "everyone was happy in the end .",
    "some of them were tired .",
    "this happens more often than you think .",
    "later they forgot about it .",
    "it was not always like this .",
    "there was a small problem .",
    "nothing else happened that week .",
    "tell me what you think .",
    "please describe it again .",
    "can you give me a fact ?",
    "what do you know ?",
    "how would you say it ?",
    "i can share a thought with you .",
    "write it down in a sentence .",
    "what is it like ?",
    "something about it was special .",
    "i will explain it later .",
]

# Headings: a document starts with one line naming its topic (like a web
# page's title), then its paragraphs.
HEADINGS = [
    "the {n}",
    "about {p}",
    "{p}",
    "notes on the {n}",
    "a few words about {p}",
    "my {n}",
    "why {p} matter",
]

# Request templates (the prompts). 0-7 training, 8-9 public, 10-13 held-out.
REQUESTS = [
    "tell me about the {n} .",
    "what do you know about {p} ?",
    "describe a {n} .",
    "write a sentence about the {n} .",
    "say something about {p} .",
    "what is special about a {n} ?",
    "give me a fact about {p} .",
    "talk about the {n} .",
    "explain what a {n} is like .",
    "can you describe {p} ?",
    "what can you tell me about a {n} ?",
    "please write about {p} .",
    "share a thought about the {n} .",
    "how would you describe the {n} ?",
]
SPLITS = {"train": range(0, 8), "public": range(8, 10), "heldout": range(10, 14)}


def topics():
    out = []
    for noun, plural, words in TOPICS:
        out.append({"noun": noun, "plural": plural, "words": words.split()})
    return out


def topic_sentence(rng, topic):
    a, b = rng.sample(topic["words"], 2)
    return rng.choice(FRAMES).format(n=topic["noun"], p=topic["plural"], a=a, b=b)


def paragraph(rng, topic, all_topics):
    sentences = []
    for _ in range(rng.randint(2, 5)):
        r = rng.random()
        if r < 0.75:
            sentences.append(topic_sentence(rng, topic))
        elif r < 0.9:
            sentences.append(rng.choice(FILLERS))
        else:
            sentences.append(topic_sentence(rng, rng.choice(all_topics)))
    return " ".join(sentences)


def corpus(seed, n_docs):
    """n_docs documents: a heading line, then 2-6 paragraphs; the next
    paragraph keeps the topic with probability 0.6."""
    rng = random.Random(seed)
    all_topics = topics()
    docs = []
    for _ in range(n_docs):
        topic = rng.choice(all_topics)
        paras = [rng.choice(HEADINGS).format(n=topic["noun"], p=topic["plural"])]
        for _ in range(rng.randint(2, 6)):
            paras.append(paragraph(rng, topic, all_topics))
            if rng.random() > 0.6:
                topic = rng.choice(all_topics)
        docs.append("\n".join(paras))
    return docs


def prompts():
    out = {name: [] for name in SPLITS}
    for name, indices in SPLITS.items():
        for i in indices:
            for t in topics():
                out[name].append(REQUESTS[i].format(n=t["noun"], p=t["plural"]))
    return out
