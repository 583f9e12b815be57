"""Writes the small data sets that `make demo` runs on (demo/data/).

    python demo/make_demo_data.py [--out_dir demo/data]

Outputs (deterministic, seeded):
  corpus.txt     plain prose for create_vocab.py / create_pretraining_data.py:
                 one sentence per line, a blank line between documents.
  task/*.tsv     a two-class sentence task in the GLUE SST-2 layout
                 (train/dev: "sentence<TAB>label", test: "index<TAB>sentence").
  squad.json     a SQuAD v1.1 file; answer offsets are computed and checked here.
  choice/*.jsonl a four-way multiple-choice task in run_multiple_choice.py's jsonl
                 layout ({"context", "endings", "label"}; test without labels),
                 drawn from its own random stream so the files above stay as they were.

All of the text below was written for this demo. The generated files are
committed, so running this script is only needed after editing it.
"""
import argparse
import json
import os
import random

SEED = 20240611

NAMES = ["Maria", "Tom", "Priya", "Jonas", "Aiko", "Samuel", "Lena", "Omar", "Grace",
         "Felix", "Nadia", "Pablo", "Ruth", "Kofi", "Ingrid", "Mateo"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
TOWNS = ["Millbrook", "Ashford", "Kettleby", "Larkwell"]

# Each topic is a list of sentence templates in narrative order. A document keeps
# most of them, in order, and fills {name}, {name2}, {day} and {town}.
TOPICS = {
    "soup": [
        "{name} decided to make a big pot of vegetable soup on {day} evening.",
        "The onions were chopped first and softened slowly in a little olive oil.",
        "Carrots, celery and a handful of red lentils went into the pot next.",
        "While the soup simmered, the kitchen filled with a warm and sweet smell.",
        "A pinch of salt and some black pepper brought out the flavour of the vegetables.",
        "{name2} came by with a loaf of crusty bread from the bakery on the corner.",
        "Fresh herbs such as parsley and thyme were stirred in just before serving.",
        "A squeeze of lemon at the end made the whole bowl taste brighter.",
        "They agreed that the soup would taste even better the next day.",
        "The leftovers were poured into glass jars and kept in the fridge.",
        "Cooking at home is cheaper than eating out, and it is often healthier too.",
        "The secret of a good stock is patience and a low flame.",
        "{name} wrote the recipe on a card so that it would not be forgotten.",
        "Nobody complained when {name} asked everyone to help with the washing up.",
    ],
    "bread": [
        "Every {day}, {name} bakes bread for the whole family.",
        "The dough needs only flour, water, salt and a spoonful of yeast.",
        "Kneading it for ten minutes makes the bread light and springy.",
        "The bowl is covered with a damp cloth and left somewhere warm to rise.",
        "After about an hour the dough has doubled in size.",
        "It is shaped into a round loaf and slashed across the top with a sharp knife.",
        "The oven is heated until it is very hot before the loaf goes in.",
        "A tray of water on the bottom shelf helps the crust become crisp.",
        "The bread is ready when the base sounds hollow as you tap it.",
        "It is hard to wait for a fresh loaf to cool before cutting into it.",
        "{name2} likes to eat the first slice with butter and a little honey.",
        "Stale bread is never wasted, because it makes excellent toast and breadcrumbs.",
    ],
    "weather": [
        "The morning began grey and still, with low clouds resting on the hills.",
        "By noon a strong wind had arrived from the west.",
        "Heavy rain drummed on the roofs of {town} for most of the afternoon.",
        "The forecast on the radio promised clearer skies for {day}.",
        "Farmers were glad of the rain after such a long dry spell.",
        "A bright rainbow appeared over the fields as the storm moved away.",
        "The temperature dropped sharply after sunset.",
        "During the night a thin layer of frost covered the cars and the grass.",
        "{name} scraped the ice from the windscreen before driving to work.",
        "Weather in the mountains can change very quickly, so walkers carry extra layers.",
        "The local weather station measured almost thirty millimetres of rain in one day.",
        "By the weekend the sun had returned and most of the puddles had dried up.",
        "Children ran outside to splash in the last puddles before they vanished.",
    ],
    "trains": [
        "The early train to the city leaves {town} at ten past seven.",
        "{name} buys a ticket from the machine and waits on platform two.",
        "This morning the train arrived four minutes late because of signal trouble.",
        "Most passengers read, sleep or look out at the passing fields.",
        "A conductor walked slowly through the carriages checking tickets.",
        "The journey takes about fifty minutes when everything runs on time.",
        "In winter the line is sometimes closed when snow blocks the deep cutting.",
        "The old station has a clock that has not stopped once in a hundred years.",
        "A new timetable added two extra trains on {day} evenings.",
        "{name2} prefers the quiet carriage at the back of the train.",
        "Trains are a calm way to travel, and they cause less pollution than cars.",
        "At the city terminus, crowds pour off the platforms towards the exits.",
        "Railway engineers inspect the tracks every night after the last service.",
    ],
    "garden": [
        "{name} spent {day} morning digging a new vegetable bed.",
        "The soil was heavy clay, so plenty of compost was mixed in to loosen it.",
        "Rows of beans, lettuce and beetroot were sown in early spring.",
        "Slugs are the greatest enemy of young lettuce plants.",
        "A thick layer of mulch keeps the ground moist during hot weather.",
        "Tomatoes grow best against a sunny wall, tied to tall bamboo canes.",
        "Bees visited the lavender from early morning until dusk.",
        "The apple tree in the corner gave more fruit than anyone could eat.",
        "Weeds grow quickly after rain, so the beds must be checked often.",
        "{name2} gave {name} a box of seedlings from the greenhouse.",
        "Watering in the evening means that less water is lost to the sun.",
        "By late summer the garden was full of colour and the baskets were full of food.",
        "Fallen leaves were raked into a pile to rot down into leaf mould.",
    ],
    "town": [
        "{town} is a small town of about four thousand people beside a slow river.",
        "Its main street has a bakery, a post office, a chemist and two cafés.",
        "A market is held in the square every {day} morning.",
        "The stone bridge over the river was built more than three centuries ago.",
        "Many families have lived in the town for several generations.",
        "The library stays open late on Thursdays so that workers can borrow books.",
        "In summer the town holds a fair with music, games and a flower show.",
        "The old mill by the river has been turned into a small museum.",
        "{name} has run the hardware shop on the corner for twenty years.",
        "Visitors often stop to photograph the brightly painted doors of the cottages.",
        "A bus connects the town with the nearest city twice an hour.",
        "Everyone seems to know everyone else, which can be comforting or annoying.",
        "At night the streets are quiet except for the sound of the river.",
    ],
    "space": [
        "Light from the Sun takes about eight minutes to reach the Earth.",
        "The Moon has no air, so there is no wind or weather on its surface.",
        "Footprints left on the Moon by astronauts could last for millions of years.",
        "Jupiter is the largest planet in our solar system.",
        "It is so large that more than a thousand Earths could fit inside it.",
        "A day on Venus is longer than a year on Venus.",
        "Stars appear to twinkle because their light passes through moving layers of air.",
        "The nearest star after the Sun is more than four light years away.",
        "On a clear night far from towns, you can see thousands of stars with the naked eye.",
        "{name} bought a small telescope and looks at the craters of the Moon on {day} nights.",
        "Saturn's rings are made of countless pieces of ice and rock.",
        "Astronomers think the universe is around fourteen billion years old.",
    ],
    "science": [
        "Water boils at one hundred degrees Celsius at sea level.",
        "On a high mountain it boils at a lower temperature, because the air pressure is lower.",
        "Ice floats because it is less dense than liquid water.",
        "Plants use sunlight to turn water and carbon dioxide into sugar and oxygen.",
        "This process, which feeds almost all life on Earth, is called photosynthesis.",
        "Sound travels faster through water than it does through air.",
        "A bolt of lightning is several times hotter than the surface of the Sun.",
        "The human heart beats around one hundred thousand times every day.",
        "Diamonds and the graphite in pencils are both made of pure carbon.",
        "Bats find their way in the dark by listening to the echoes of their own calls.",
        "Every living thing is made of tiny units called cells.",
        "In class on {day}, {name} showed that a magnet can pick up iron but not copper.",
    ],
    "football": [
        "The {town} football club played its last home game of the season on {day}.",
        "Hundreds of supporters filled the small stand beside the pitch.",
        "The visiting team scored early from a corner kick.",
        "Just before half time, {name} equalised with a low shot into the far corner.",
        "The second half was tense, and both goalkeepers made fine saves.",
        "With five minutes left, the home side was awarded a penalty.",
        "The captain stepped up and calmly put the ball into the net.",
        "When the final whistle blew, the crowd sang and cheered for a long time.",
        "The coach praised the players for never giving up.",
        "The win lifted the club to third place in the league.",
        "Training starts again in July, after a short summer break.",
        "{name2} has not missed a single home game in ten years.",
    ],
    "running": [
        "{name} started running last spring in order to feel healthier.",
        "At first, even a single kilometre felt difficult.",
        "A simple plan of three short runs a week made progress steady.",
        "Good shoes matter far more than expensive clothes.",
        "By autumn {name} could run ten kilometres without stopping.",
        "The park in {town} has a flat path that loops around the lake.",
        "Stretching gently after a run helps the muscles recover.",
        "On {day} mornings a group of runners meets by the park gates.",
        "Running with other people makes the time pass quickly.",
        "Drinking plenty of water is important, especially in warm weather.",
        "{name2} prefers cycling, which is gentler on the knees.",
        "Both sports are a cheap way to stay fit and to see the countryside.",
    ],
    "pets": [
        "{name} adopted a small grey cat from the animal shelter.",
        "For the first week the cat hid under the bed and only came out at night.",
        "Slowly it grew braver and began to explore the rest of the house.",
        "Now it sleeps on the sunny windowsill for most of the afternoon.",
        "Next door, {name2} has a lively brown dog called Biscuit.",
        "Biscuit needs two long walks every day, whatever the weather.",
        "Dogs and cats can become good friends if they meet when they are young.",
        "The vet recommends a check-up for every pet once a year.",
        "A healthy diet and fresh water keep pets strong and happy.",
        "The cat ignores the dog, and the dog pretends that it does not care.",
        "Pets bring a great deal of joy, but they also need time and patience.",
        "In the evening the whole household gathers in the warm kitchen.",
    ],
    "school": [
        "The school at the end of the lane has just six classrooms.",
        "Lessons begin at nine o'clock, after the children have played in the yard.",
        "{name} teaches the oldest class and loves reading stories aloud.",
        "This term the pupils are learning about rivers and how they shape the land.",
        "On {day} they walked down to the river to measure how fast it flowed.",
        "Each child dropped a leaf into the water and timed it over ten metres.",
        "Back in the classroom they drew charts of their results.",
        "The library next door lends the school a box of new books every month.",
        "Reading for twenty minutes a day helps children learn many new words.",
        "{name2}, who is eight, has already read every book about dinosaurs.",
        "At the end of term, parents are invited to come and see the children's work.",
        "The head teacher says that the best lessons are the ones that happen outdoors.",
    ],
    "harbour": [
        "The harbour at {town} was busy long before dawn.",
        "Fishing boats returned with their catch of mackerel and crab.",
        "Gulls circled overhead, hoping for scraps from the nets.",
        "{name} has worked on the boats ever since leaving school.",
        "The sea can be calm and blue in the morning and wild by the afternoon.",
        "Sailors watch the clouds and the wind closely before they set out.",
        "A lighthouse on the headland warns ships away from the rocks.",
        "Tourists stroll along the harbour wall and buy fish and chips.",
        "At low tide, children search the rock pools for crabs and starfish.",
        "The tide rises and falls twice a day, pulled by the Moon.",
        "{name2} sells fresh fish from a small stall near the slipway.",
        "In a storm, the waves crash over the wall and soak the road.",
    ],
    "hills": [
        "{name} and {name2} set out early to climb the hill behind the village.",
        "The path wound through pine woods and over a rocky stream.",
        "Near the top the trees gave way to grass and purple heather.",
        "They stopped to eat sandwiches beside a small stone shelter.",
        "From the summit they could see three lakes and the distant sea.",
        "Clouds rolled in quickly, so they did not stay there for long.",
        "A paper map and a compass are still useful, even with a phone.",
        "On the way down they met a shepherd moving sheep to a lower field.",
        "Their legs were tired, but they were pleased with the day.",
        "Mountain weather is often colder and windier than in the valley below.",
        "The walk took six hours in total, including the stops.",
        "They promised to come back in autumn, when the leaves turn red and gold.",
    ],
    "music": [
        "{name} has played the violin since the age of seven.",
        "Practice happens every evening for at least half an hour.",
        "The town orchestra rehearses in the church hall on {day} nights.",
        "Their next concert will include music by Mozart and a new piece by a local composer.",
        "Learning an instrument well takes years of patient work.",
        "Scales are boring, but they make difficult passages much easier.",
        "{name2} plays the drums in a band that performs at weddings.",
        "The band practises in a garage, much to the dismay of the neighbours.",
        "Music can lift the mood of a whole room in a few seconds.",
        "Before a concert, the players tune their instruments carefully.",
        "The audience clapped for a long time after the final note.",
        "Afterwards everyone shared tea and cake in the hall.",
    ],
    "computers": [
        "{name} bought a second-hand laptop in order to work from home.",
        "It was slow at first, so the old programs were removed.",
        "A fresh installation of the operating system made it run much faster.",
        "Backups are copied to an external drive every {day}.",
        "Strong passwords protect accounts from being broken into.",
        "A password manager remembers them, so only one has to be learned.",
        "The internet connection in the village improved when fibre cables arrived.",
        "Video calls now let the family talk with relatives who live abroad.",
        "{name2} is learning to write small programs in Python.",
        "The first program printed a greeting, and the second added up numbers.",
        "Computers are fast, but they only do exactly what they are told.",
        "Turning a device off and on again still fixes a surprising number of problems.",
    ],
    "market": [
        "The market in the square at {town} opens at eight o'clock on {day}.",
        "Its stalls sell fruit, vegetables, cheese, eggs and flowers.",
        "{name} always starts at the stall with the best strawberries.",
        "Prices fall near closing time, when the traders want to sell everything.",
        "Many shoppers bring their own bags and baskets.",
        "A man with an accordion plays old songs by the fountain.",
        "The cheese seller lets customers taste a piece before they buy.",
        "{name2} bought a bunch of yellow tulips for a friend's birthday.",
        "Buying local food supports the farmers who grow it.",
        "By one o'clock the stalls are packed away and the square is swept clean.",
        "The smell of roasted nuts lingers in the air for the rest of the day.",
    ],
}


def make_corpus(rng):
    """Two documents per topic, topics in shuffled order."""
    docs = []
    for topic, templates in TOPICS.items():
        for _ in range(2):
            name, name2 = rng.sample(NAMES, 2)
            fill = dict(name=name, name2=name2, day=rng.choice(DAYS), town=rng.choice(TOWNS))
            keep = sorted(rng.sample(range(len(templates)), len(templates) - rng.randrange(2)))
            docs.append([templates[i].format(**fill) for i in keep])
    rng.shuffle(docs)
    for doc in docs:
        for line in doc:
            words = len(line.split())
            assert 5 <= words <= 30, (words, line)
    return docs


# ---------------------------------------------------------------------------
# Sentence classification: 1 = a favourable remark, 0 = an unfavourable one.
# ---------------------------------------------------------------------------

THINGS = ["the soup", "the bread", "the train journey", "the weather on {day}",
          "the concert", "the football match", "the hotel room", "the walk by the river",
          "the market", "the new laptop", "the library", "the café", "the film",
          "the garden", "the museum", "the bus ride", "the school play", "the pizza"]
GOOD = ["wonderful", "delightful", "excellent", "lovely", "superb", "charming", "great",
        "fantastic", "pleasant", "brilliant"]
BAD = ["awful", "terrible", "dreadful", "disappointing", "boring", "miserable", "horrible",
       "poor", "dull", "unpleasant"]
GOOD_TAILS = ["I would happily go back", "everyone left smiling", "it was worth every penny",
              "we enjoyed every minute", "I cannot wait to do it again",
              "it made my whole week", "I would recommend it to anyone"]
BAD_TAILS = ["I will never go back", "we left early", "it was a waste of money",
             "nobody enjoyed it", "I regret going at all", "it ruined the whole day",
             "I would not recommend it to anyone"]
SHAPES = ["{Thing} was {adj}, and {tail}.",
          "Honestly, {thing} was {adj}; {tail}.",
          "I thought {thing} was {adj} and {tail}.",
          "What {a} {adj} experience {thing} was, {tail}."]


def _article(word):
    return "an" if word[0] in "aeiou" else "a"


def make_task(rng, count):
    """`count` distinct (sentence, label) rows of the demo's sentiment task."""
    seen = set()
    rows = []
    while len(rows) < count:
        label = rng.randrange(2)
        adj = rng.choice(GOOD if label else BAD)
        tail = rng.choice(GOOD_TAILS if label else BAD_TAILS)
        thing = rng.choice(THINGS).format(day=rng.choice(DAYS))
        text = rng.choice(SHAPES).format(thing=thing, Thing=thing[0].upper() + thing[1:],
                                         adj=adj, a=_article(adj), tail=tail)
        if text in seen:
            continue
        seen.add(text)
        rows.append((text, label))
    return rows


# ---------------------------------------------------------------------------
# Reading comprehension (SQuAD v1.1 layout).
# ---------------------------------------------------------------------------

SQUAD = [
    ("Millbrook",
     "Millbrook is a market town of about four thousand people on the banks of the River "
     "Wend. The town grew up around a water mill that ground flour for the surrounding "
     "farms, and the mill wheel still turns today, although the building is now a museum. "
     "A stone bridge with five arches was built across the river in 1712 and remains the "
     "only crossing for several miles. Every Saturday morning a market fills the central "
     "square with stalls selling vegetables, cheese and flowers. The town's library, "
     "founded by a retired schoolteacher named Edith Marsh, opens late on Thursdays.",
     [("How many people live in Millbrook?", "about four thousand"),
      ("On the banks of which river does Millbrook stand?", "River Wend"),
      ("What is the old mill building used as today?", "a museum"),
      ("In what year was the stone bridge built?", "1712"),
      ("How many arches does the bridge have?", "five"),
      ("On which day of the week is the market held?", "Saturday"),
      ("Who founded the town's library?", "Edith Marsh")]),
    ("Gull_Point_Lighthouse",
     "The lighthouse on Gull Point was lit for the first time in 1858. Its tower is "
     "thirty-one metres tall and is painted with red and white bands so that sailors can "
     "recognise it by day. At night the lamp flashes twice every fifteen seconds, a pattern "
     "that belongs to no other light on this coast. For almost a century the light was "
     "looked after by keepers who lived in the cottages at the foot of the tower. The last "
     "keeper, Arthur Penrose, left in 1989, when the lamp was made automatic and began to "
     "be controlled from a station on the mainland.",
     [("When was the Gull Point lighthouse first lit?", "1858"),
      ("How tall is the lighthouse tower?", "thirty-one metres"),
      ("What colours are the bands on the tower?", "red and white"),
      ("How often does the lamp flash at night?", "twice every fifteen seconds"),
      ("Who was the last keeper of the lighthouse?", "Arthur Penrose"),
      ("In what year did the last keeper leave?", "1989"),
      ("Where did the keepers live?", "in the cottages at the foot of the tower")]),
    ("Sourdough",
     "Sourdough bread is leavened by a starter, a mixture of flour and water in which wild "
     "yeasts and bacteria live together. The bacteria produce lactic acid, which gives the "
     "bread its slightly sour taste, while the yeasts produce the carbon dioxide that makes "
     "the dough rise. A starter must be fed with fresh flour and water regularly, usually "
     "once a day if it is kept at room temperature. Because wild yeasts work slowly, a "
     "sourdough loaf often needs eight to twelve hours to rise, far longer than bread made "
     "with packaged yeast. Many bakers bake their loaves in a heavy covered pot, which traps "
     "steam and helps the crust become thick and crisp.",
     [("What is a sourdough starter?", "a mixture of flour and water"),
      ("What gives sourdough bread its sour taste?", "lactic acid"),
      ("What gas makes the dough rise?", "carbon dioxide"),
      ("How often is a starter kept at room temperature fed?", "once a day"),
      ("How long does a sourdough loaf often need to rise?", "eight to twelve hours"),
      ("What do many bakers bake their loaves in?", "a heavy covered pot")]),
    ("Valley_Line",
     "The Valley Line is a single-track railway that runs for twenty-six miles between "
     "Harlow Junction and the coastal town of Porthwen. It opened in 1871, mainly to carry "
     "slate from the quarries to the harbour, and passenger trains were added a few years "
     "later. The line crosses the river eleven times and passes through a tunnel nearly a "
     "mile long under Beacon Hill. Today trains run every hour in summer and every two hours "
     "in winter, and the whole journey takes about fifty-five minutes. A group of volunteers "
     "looks after the small stations along the route and plants flowers on the platforms "
     "each spring.",
     [("How long is the Valley Line?", "twenty-six miles"),
      ("Which coastal town is at the end of the Valley Line?", "Porthwen"),
      ("When did the Valley Line open?", "1871"),
      ("What was the line mainly built to carry?", "slate"),
      ("How many times does the line cross the river?", "eleven"),
      ("Under which hill does the tunnel pass?", "Beacon Hill"),
      ("How long does the whole journey take?", "about fifty-five minutes"),
      ("Who looks after the small stations?", "A group of volunteers")]),
    ("Water_cycle",
     "Water on Earth moves in a continuous cycle. The Sun warms the oceans, lakes and "
     "rivers, and some of the water evaporates into the air as an invisible gas called "
     "water vapour. As warm air rises it cools, and the vapour condenses into tiny droplets "
     "that gather to form clouds. When the droplets join together and become too heavy, "
     "they fall back to the ground as rain, snow or hail. Some of this water soaks into the "
     "soil to become groundwater, while the rest flows over the land into streams and "
     "eventually returns to the sea. Plants also release water vapour through their leaves "
     "in a process known as transpiration.",
     [("What warms the oceans, lakes and rivers?", "The Sun"),
      ("What is the invisible gas that water evaporates into called?", "water vapour"),
      ("What do the tiny droplets gather to form?", "clouds"),
      ("In what forms does water fall back to the ground?", "rain, snow or hail"),
      ("What does water that soaks into the soil become?", "groundwater"),
      ("What is the release of water vapour through leaves called?", "transpiration")]),
    ("Millbrook_Rovers",
     "Millbrook Rovers were founded in 1903 by workers from the town's brick factory. The "
     "club plays its home games at Mill Lane, a small ground with a single covered stand "
     "that holds about nine hundred spectators. The team wears green shirts with white "
     "sleeves, and its supporters are known locally as the Millers. The club's most famous "
     "season came in 1967, when it reached the fourth round of the national cup and lost "
     "narrowly to a professional side. The current captain, Daniel Okafor, has played more "
     "than three hundred games for the club.",
     [("When were Millbrook Rovers founded?", "1903"),
      ("Who founded Millbrook Rovers?", "workers from the town's brick factory"),
      ("Where does the club play its home games?", "Mill Lane"),
      ("How many spectators does the stand hold?", "about nine hundred"),
      ("What colour are the team's shirts?", "green"),
      ("What are the club's supporters known as?", "the Millers"),
      ("Which round of the national cup did the club reach in 1967?", "the fourth round"),
      ("Who is the current captain?", "Daniel Okafor")]),
]


# ---------------------------------------------------------------------------
# Multiple choice (run_multiple_choice.py --task_name=jsonl).
# ---------------------------------------------------------------------------

# Where someone went, and what they did there: the right ending follows from the place.
ERRANDS = [
    ("bakery", "came home with a warm loaf of bread"),
    ("library", "borrowed two books about the sea"),
    ("station", "caught the early train to the coast"),
    ("market", "filled a basket with vegetables and cheese"),
    ("river", "sat on the bank and watched the boats"),
    ("garden", "planted a row of beans by the fence"),
]


def make_choices(rng, count):
    """`count` questions: a visit to a place, four endings, the place's own one right."""
    questions = []
    for _ in range(count):
        picked = rng.sample(range(len(ERRANDS)), 4)
        name, day = rng.choice(NAMES), rng.choice(DAYS)
        place = ERRANDS[picked[0]][0]
        context = "On %s %s walked to the %s." % (day, name, place)
        endings = ["%s %s." % (name, ERRANDS[i][1]) for i in picked]
        order = list(range(4))
        rng.shuffle(order)
        questions.append({"context": context, "endings": [endings[i] for i in order],
                          "label": order.index(0)})
    return questions


def make_squad():
    """The demo's SQuAD v1.1 data, answer offsets found in each context."""
    data = []
    qid = 0
    for title, context, qas in SQUAD:
        entries = []
        for question, answer in qas:
            start = context.find(answer)
            assert start >= 0, (title, answer)
            assert context[start:start + len(answer)] == answer
            qid += 1
            entries.append({"id": "demo-%03d" % qid, "question": question,
                            "answers": [{"text": answer, "answer_start": start}]})
        data.append({"title": title, "paragraphs": [{"context": context, "qas": entries}]})
    return {"version": "1.1", "data": data}


def main():
    """Writes the demo's corpus, task files and SQuAD files under --out_dir."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out_dir", default=os.path.join(os.path.dirname(__file__), "data"))
    args = parser.parse_args()
    rng = random.Random(SEED)
    os.makedirs(os.path.join(args.out_dir, "task"), exist_ok=True)

    docs = make_corpus(rng)
    with open(os.path.join(args.out_dir, "corpus.txt"), "w", encoding="utf-8") as f:
        f.write("\n\n".join("\n".join(doc) for doc in docs) + "\n")

    rows = make_task(rng, 220)
    splits = {"train": rows[:160], "dev": rows[160:200]}
    for split, part in splits.items():
        with open(os.path.join(args.out_dir, "task", split + ".tsv"), "w",
                  encoding="utf-8") as f:
            f.write("sentence\tlabel\n")
            for text, label in part:
                f.write("%s\t%d\n" % (text, label))
    with open(os.path.join(args.out_dir, "task", "test.tsv"), "w", encoding="utf-8") as f:
        f.write("index\tsentence\n")
        for index, (text, _) in enumerate(rows[200:]):
            f.write("%d\t%s\n" % (index, text))

    squad = make_squad()
    with open(os.path.join(args.out_dir, "squad.json"), "w", encoding="utf-8") as f:
        json.dump(squad, f, indent=1, ensure_ascii=False)
        f.write("\n")

    questions = make_choices(random.Random(SEED + 1), 170)
    os.makedirs(os.path.join(args.out_dir, "choice"), exist_ok=True)
    for split, part in (("train", questions[:120]), ("dev", questions[120:160]),
                        ("test", questions[160:])):
        with open(os.path.join(args.out_dir, "choice", split + ".jsonl"), "w",
                  encoding="utf-8") as f:
            for question in part:
                if split == "test":
                    question = {k: v for k, v in question.items() if k != "label"}
                f.write(json.dumps(question) + "\n")

    num_q = sum(len(p["qas"]) for d in squad["data"] for p in d["paragraphs"])
    print("corpus.txt: %d documents, %d sentences" % (len(docs), sum(len(d) for d in docs)))
    print("task: %d train, %d dev, %d test" % (160, 40, len(rows) - 200))
    print("squad.json: %d paragraphs, %d questions" % (len(squad["data"]), num_q))
    print("choice: 120 train, 40 dev, 10 test questions")


if __name__ == "__main__":
    main()
