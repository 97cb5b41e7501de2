// The embedded default corpus ("builtin:default"), so `ddx train` runs with no arguments and
// no downloads. It is generated, not shipped: a fixed seed drives ddx's own PRNG through
// templates written for ddx (hence licence-clean), giving ~1 MB of English-like text with
// learnable structure: a small invented world whose facts recur across documents, simple
// stories, arithmetic with correct answers, records, and Alpaca-format instructions. A tiny
// model's loss falls visibly within a few hundred steps. Changing the output here requires
// bumping kDocumentFormatVersion (dataset_internal.h) so old token caches are rebuilt.
#include <iterator>
#include <string>
#include <vector>

#include "data/dataset_internal.h"
#include "data/prng.h"

namespace ddx::data {
namespace {

constexpr uint64_t kCorpusSeed = 0xDD5C0A9u;
constexpr size_t kTargetBytes = 1200 * 1000;

const char* const kSyllables[] = {"ar", "bel", "cor", "dun", "el", "fen", "gar", "hol", "is", "jor",
                                  "kel", "lin", "mor", "nar", "os", "pel", "quin", "ros", "sil", "tam",
                                  "ul", "ven", "wyn", "yor", "zel", "bro", "ka", "mi", "ta", "lo"};
const char* const kRivers[] = {"Silver", "Amber", "Quiet", "Long", "Cold", "Green", "Stony", "Winding"};
const char* const kRegions[] = {"northern hills", "southern plain", "eastern marsh", "western coast",
                                "high valley", "old forest"};
const char* const kJobs[] = {"baker", "weaver", "fisher", "miller", "smith", "potter", "farmer",
                             "carpenter", "teacher", "brewer", "mason", "shepherd"};
const char* const kGoods[] = {"bread", "cloth", "fish", "flour", "iron tools", "clay pots", "apples",
                              "wooden chairs", "books", "cider", "stone blocks", "wool"};
const char* const kAnimals[] = {"fox", "owl", "badger", "heron", "otter", "goat", "crow", "hare",
                                "deer", "mouse", "wolf", "bear"};
const char* const kColors[] = {"red", "grey", "brown", "white", "black", "golden", "pale", "spotted"};
const char* const kAdjectives[] = {"clever", "tired", "curious", "brave", "quiet", "old", "young",
                                   "hungry", "careful", "cheerful"};
const char* const kPlaces[] = {"river", "market", "bridge", "mill", "forest", "hill", "well",
                               "harbour", "library", "orchard"};
const char* const kObjects[] = {"a lost key", "a silver coin", "some warm bread", "an old map",
                                "a red ribbon", "a small boat", "a book of songs", "fresh water"};
const char* const kWeather[] = {"rain", "snow", "sun", "wind", "fog", "frost"};
const char* const kDays[] = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};
const char* const kNumberWords[] = {"zero", "one", "two", "three", "four", "five", "six", "seven",
                                    "eight", "nine", "ten", "eleven", "twelve"};

std::string capitalised(std::string s) {
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 32);
  return s;
}

std::string invented_name(Prng& rng, int syllables) {
  std::string s;
  for (int i = 0; i < syllables; ++i) s += rng.pick(kSyllables);
  return capitalised(s);
}

// A town's facts are fixed, so every document about it agrees: that is what a model can learn.
struct Town {
  std::string name, river, region, job, good, mayor;
  int bridges, mills, founded, people;
};

struct Person {
  std::string name, job, animal, color;
  int town, age;
};

struct World {
  std::vector<Town> towns;
  std::vector<Person> people;
};

World make_world(Prng& rng) {
  World w;
  for (int i = 0; i < 40; ++i) {
    Town t;
    t.name = invented_name(rng, 2 + static_cast<int>(rng.below(2)));
    t.river = rng.pick(kRivers);
    t.region = rng.pick(kRegions);
    const size_t job = rng.below(std::size(kJobs));
    t.job = kJobs[job];
    t.good = kGoods[job];
    t.mayor = invented_name(rng, 2);
    t.bridges = static_cast<int>(rng.range(1, 9));
    t.mills = static_cast<int>(rng.range(0, 6));
    t.founded = static_cast<int>(rng.range(1100, 1900));
    t.people = static_cast<int>(rng.range(3, 400)) * 100;
    w.towns.push_back(t);
  }
  for (int i = 0; i < 120; ++i) {
    Person p;
    p.name = invented_name(rng, 2);
    p.job = rng.pick(kJobs);
    p.animal = rng.pick(kAnimals);
    p.color = rng.pick(kColors);
    p.town = static_cast<int>(rng.below(w.towns.size()));
    p.age = static_cast<int>(rng.range(18, 90));
    w.people.push_back(p);
  }
  return w;
}

std::string town_article(Prng& rng, const World& w) {
  const Town& t = w.towns[rng.below(w.towns.size())];
  std::string s = t.name + " is a town in the " + t.region + ", on the " + t.river + " river. ";
  s += "It was founded in " + std::to_string(t.founded) + " and about " + std::to_string(t.people) +
       " people live there today. ";
  s += "The town has " + std::to_string(t.bridges) + (t.bridges == 1 ? " bridge" : " bridges") + " and " +
       std::to_string(t.mills) + (t.mills == 1 ? " mill" : " mills") + ". ";
  s += "Many people in " + t.name + " work as " + t.job + "s, and the town is known for its " + t.good + ". ";
  if (rng.chance(60)) s += "The mayor of " + t.name + " is " + t.mayor + ". ";
  if (rng.chance(50)) {
    const std::string weather = rng.pick(kWeather);
    const std::string day = rng.pick(kDays);
    const std::string place = rng.pick(kPlaces);
    s += "In the " + weather + " of " + day + ", traders carry " + t.good + " from " + t.name + " to the " +
         place + ".";
  }
  return s;
}

std::string story(Prng& rng, const World& w) {
  const Person& p = w.people[rng.below(w.people.size())];
  const Town& home = w.towns[p.town];
  const std::string adjective = rng.pick(kAdjectives);
  const std::string animal = adjective + " " + rng.pick(kAnimals);
  std::string s = "Once upon a time in " + home.name + " there lived a " + p.job + " called " + p.name + ". ";
  s += p.name + " had a " + p.color + " " + p.animal + " and was " + std::to_string(p.age) + " years old. ";
  const int scenes = static_cast<int>(rng.range(2, 5));
  for (int i = 0; i < scenes; ++i) {
    // Every draw is its own statement: the operands of + are evaluated in an unspecified
    // order, and the corpus must not depend on the compiler.
    const uint64_t kind = rng.below(5);
    const std::string place = rng.pick(kPlaces);
    const std::string object = rng.pick(kObjects);
    const std::string weather = rng.pick(kWeather);
    const std::string day = rng.pick(kDays);
    const int64_t baskets = rng.range(2, 30);
    switch (kind) {
      case 0:
        s += "One morning " + p.name + " walked to the " + place + " to look for " + object + ". ";
        break;
      case 1:
        s += "There " + p.name + " met a " + animal + ", who said: \"The " + weather + " will come before " +
             day + ".\" ";
        break;
      case 2:
        s += "The " + p.animal + " ran across the " + std::to_string(home.bridges) + " bridges of " +
             home.name + " and came back with " + object + ". ";
        break;
      case 3:
        s += p.name + " sold " + std::to_string(baskets) + " baskets of " + home.good +
             " at the market and bought " + object + ". ";
        break;
      default:
        s += "It was a day of " + weather + ", so " + p.name + " stayed near the " + place +
             " and told the " + p.animal + " a story. ";
        break;
    }
  }
  s += "In the evening " + p.name + " went home to " + home.name + ", tired but happy.";
  return s;
}

std::string arithmetic(Prng& rng) {
  std::string s;
  const int lines = static_cast<int>(rng.range(4, 12));
  for (int i = 0; i < lines; ++i) {
    const int64_t a = rng.range(0, rng.chance(70) ? 20 : 999);
    const int64_t b = rng.range(0, rng.chance(70) ? 20 : 999);
    const int64_t n = rng.range(0, 12);
    switch (rng.below(5)) {
      case 0: s += std::to_string(a) + " + " + std::to_string(b) + " = " + std::to_string(a + b) + "\n"; break;
      case 1: s += "What is " + std::to_string(a) + " plus " + std::to_string(b) + "? It is " + std::to_string(a + b) + ".\n"; break;
      case 2: {
        const int64_t hi = a > b ? a : b, lo = a > b ? b : a;
        s += std::to_string(hi) + " - " + std::to_string(lo) + " = " + std::to_string(hi - lo) + "\n";
        break;
      }
      case 3: {
        const int64_t x = a % 13, y = b % 13;
        s += std::to_string(x) + " times " + std::to_string(y) + " is " + std::to_string(x * y) + ".\n";
        break;
      }
      default: {
        s += "The number after " + std::string(kNumberWords[n]) + " is " +
             (n < 12 ? kNumberWords[n + 1] : "thirteen") + ".\n";
        break;
      }
    }
  }
  if (rng.chance(40)) {
    const int64_t start = rng.range(1, 50);
    const int64_t step = rng.range(1, 9);
    s += "Counting by " + std::to_string(step) + " from " + std::to_string(start) + ":";
    for (int i = 0; i < 8; ++i) s += " " + std::to_string(start + i * step);
    s += "\n";
  }
  return s;
}

std::string records(Prng& rng, const World& w) {
  std::string s = "Register of residents\n";
  const int n = static_cast<int>(rng.range(3, 7));
  for (int i = 0; i < n; ++i) {
    const Person& p = w.people[rng.below(w.people.size())];
    s += "Name: " + p.name + "\nAge: " + std::to_string(p.age) + "\nTown: " + w.towns[p.town].name +
         "\nJob: " + p.job + "\nPet: " + p.color + " " + p.animal + "\n\n";
  }
  return s;
}

std::string instruction(Prng& rng, const World& w) {
  const Town& t = w.towns[rng.below(w.towns.size())];
  const int64_t a = rng.range(0, 99);
  const int64_t b = rng.range(0, 99);
  switch (rng.below(4)) {
    case 0:
      return format_alpaca("Add the two numbers.", std::to_string(a) + " and " + std::to_string(b),
                           std::to_string(a) + " plus " + std::to_string(b) + " is " + std::to_string(a + b) + ".");
    case 1:
      return format_alpaca("Which river flows through " + t.name + "?", "",
                           t.name + " lies on the " + t.river + " river.");
    case 2:
      return format_alpaca("Describe the town in one sentence.", t.name,
                           t.name + " is a town of about " + std::to_string(t.people) + " people in the " +
                               t.region + ", known for its " + t.good + ".");
    default:
      return format_alpaca("How many bridges does " + t.name + " have?", "",
                           t.name + " has " + std::to_string(t.bridges) + (t.bridges == 1 ? " bridge." : " bridges."));
  }
}

}  // namespace

std::vector<std::string> builtin_corpus_documents() {
  Prng rng(kCorpusSeed);
  const World world = make_world(rng);
  std::vector<std::string> docs;
  size_t bytes = 0;
  while (bytes < kTargetBytes) {
    std::string doc;
    const uint64_t kind = rng.below(100);
    if (kind < 30) {
      doc = story(rng, world);
    } else if (kind < 55) {
      doc = town_article(rng, world);
    } else if (kind < 75) {
      doc = arithmetic(rng);
    } else if (kind < 87) {
      doc = records(rng, world);
    } else {
      doc = instruction(rng, world);
    }
    bytes += doc.size();
    docs.push_back(std::move(doc));
  }
  return docs;
}

}  // namespace ddx::data
