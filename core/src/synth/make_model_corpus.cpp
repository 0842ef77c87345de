// The text the synthetic tokenizer's BPE merges are learned from: English prose, source code
// and a dozen other languages, written for this project, so that prompts to a synthetic model
// tokenise into pieces of a sensible size. Changing it changes every synthetic tokenizer (and
// so every generated model), like changing a seed.
#include "synth/make_model_parts.hpp"

namespace k3::detail {
namespace {

constexpr std::string_view kEnglish = R"K3TEXT(
The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with a single step.
Once upon a time, in a small town near the sea, there lived an old clockmaker who repaired the clocks of
everyone in the village. Every morning he opened his shop at seven o'clock, made a cup of tea, and listened
to the ticking of a hundred clocks. People said that he could tell the time without looking, because he
knew which clock would strike first. When the children asked him how he did it, he smiled and answered that
time is not something you read, it is something you hear.

Large language models are trained on text from books, articles, and the internet. They learn to predict the
next token in a sequence, and this simple objective turns out to be surprisingly powerful. A mixture of
experts model routes each token to a small number of expert networks, so that only a fraction of the
parameters is used for any single token. The router chooses the experts with the highest scores, and the
outputs of the chosen experts are combined with weights that sum to one. Because the experts are large and
the memory of a laptop is small, an engine can keep the experts on disk and read only the ones it needs.
Streaming weights from storage is slower than reading them from memory, but a good cache hides much of the
cost: experts that were used recently are likely to be used again.

Weather report for the weekend: on Saturday the morning will be cloudy with light rain in the north, while
the south stays dry and warm with temperatures around twenty-four degrees. On Sunday a cold front moves in
from the west, bringing strong winds, heavy showers and a drop in temperature. Drivers should expect delays
on the coastal roads. The outlook for next week is brighter, with sunshine returning by Tuesday afternoon.

Recipe: to make a simple tomato soup, heat two tablespoons of olive oil in a large pot, add one chopped
onion and two cloves of garlic, and cook until soft. Add eight ripe tomatoes, a teaspoon of salt, a pinch of
sugar and half a litre of water. Simmer for twenty minutes, then blend until smooth. Serve hot with fresh
bread, a little cream and some basil leaves. The soup keeps for three days in the fridge.

Questions and answers. What is the capital of France? The capital of France is Paris. How many days are in a
leap year? There are 366 days in a leap year. Why is the sky blue? Sunlight is scattered by the molecules of
the air, and blue light is scattered more than red light because it has a shorter wavelength. Who wrote the
first computer program? Ada Lovelace is often described as the first programmer, for her notes on the
Analytical Engine in 1843. What's the difference between weather and climate? Weather is what you get today;
climate is what you expect over many years. I'm sure you'll find that they're related, but we've learned
that it isn't the same thing.

In 1969, the first humans walked on the Moon. In 1989, the Berlin Wall fell. In 2007, the first smartphone
with a large touch screen was sold. Prices rose by 3.5% in March, and the central bank kept interest rates
at 4.25 percent. The meeting is scheduled for 10:30 on 2024-05-17 in room 214; please bring 2 copies of the
report, which is 48 pages long and costs $19.99 to print.
)K3TEXT";

constexpr std::string_view kCode = R"K3TEXT(
#include <cstdint>
#include <vector>

// Returns the index of the largest element, or -1 for an empty vector.
int argmax(const std::vector<float>& values) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(values.size()); ++i) {
    if (best < 0 || values[i] > values[best]) best = i;
  }
  return best;
}

struct Config {
  std::int64_t hidden_size = 0;
  std::int64_t num_layers = 0;
  double rms_norm_eps = 1e-5;
};

template <typename T>
T clamp(T value, T low, T high) {
  return value < low ? low : (value > high ? high : value);
}

def softmax(xs):
    """Return the softmax of a list of floats."""
    m = max(xs)
    exps = [math.exp(x - m) for x in xs]
    total = sum(exps)
    return [e / total for e in exps]

class Tokenizer:
    def __init__(self, path):
        self.ranks = {}
        with open(path, "rb") as f:
            for line in f:
                token, rank = line.split()
                self.ranks[base64.b64decode(token)] = int(rank)

    def encode(self, text):
        return [self.ranks[b] for b in text.encode("utf-8")]

if __name__ == "__main__":
    print(softmax([1.0, 2.0, 3.0]))

function fetchJson(url) {
  return fetch(url).then((response) => {
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    return response.json();
  });
}

const items = [1, 2, 3].map((x) => x * 2).filter((x) => x > 2);
console.log(JSON.stringify({ items, count: items.length }, null, 2));

fn main() {
    let v: Vec<u32> = (0..10).collect();
    let sum: u32 = v.iter().sum();
    println!("sum = {}", sum);
}

SELECT name, COUNT(*) AS orders FROM customers JOIN orders ON orders.customer_id = customers.id
WHERE orders.created_at >= '2024-01-01' GROUP BY name ORDER BY orders DESC LIMIT 10;

$ cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
$ cmake --build build -j2 && ctest --test-dir build --output-on-failure
$ git commit -m "Fix the off-by-one error in the parser" && git push origin main

{"model": "demo", "layers": 12, "experts": 64, "top_k": 6, "tokens": [163584, 42, 7, 163586]}

# Heading
- a list item with `inline code`
- another item, with a [link](https://example.com/docs/index.html)
)K3TEXT";

constexpr std::string_view kWorld = R"K3TEXT(
Le petit prince demanda au renard ce que signifie apprivoiser. « C'est une chose trop oubliée, dit le renard.
Ça signifie créer des liens. » Nous avons passé l'été à la campagne, où il faisait très beau et très chaud.
Der schnelle braune Fuchs springt über den faulen Hund. Wir fahren morgen früh mit dem Zug nach München,
weil das Wetter schön ist und die Straßen voller Autos sind. Können Sie mir bitte helfen?
El rápido zorro marrón salta sobre el perro perezoso. Mañana vamos a la playa con nuestros amigos, y
después comeremos paella en un restaurante pequeño cerca del puerto. ¿Dónde está la estación de tren?
La volpe veloce salta sopra il cane pigro. Domani andiamo al mare, e la sera mangiamo una pizza insieme.
A rápida raposa marrom pula sobre o cão preguiçoso. Amanhã vamos visitar os nossos avós no interior.
De snelle bruine vos springt over de luie hond. Morgen gaan we fietsen langs de rivier.
Szybki brązowy lis przeskakuje nad leniwym psem. Jutro pojedziemy do Krakowa pociągiem.
Быстрая коричневая лиса прыгает через ленивую собаку. Завтра мы поедем в Москву на поезде, потому что
погода будет хорошая. Спасибо большое за вашу помощь!
Γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο. Αύριο θα πάμε στη θάλασσα.
Hızlı kahverengi tilki tembel köpeğin üzerinden atlar. Yarın sabah İstanbul'a gidiyoruz.
敏捷的棕色狐狸跳过了懒狗。明天我们要去北京参观博物馆，然后在公园里散步。今天天气很好，我们一起去吃饭吧。
人工智能模型通过学习大量的文本来预测下一个词。专家混合模型只为每个词元激活一小部分参数。
素早い茶色の狐がのろまな犬を飛び越える。明日は友達と一緒に京都へ行きます。日本語の文章を書くのは楽しいです。
빠른 갈색 여우가 게으른 개를 뛰어넘는다. 내일 우리는 서울에 있는 박물관에 갈 것입니다. 감사합니다!
الثعلب البني السريع يقفز فوق الكلب الكسول. سنذهب غدا إلى السوق لشراء الخضروات والفواكه.
השועל החום המהיר קופץ מעל הכלב העצלן. מחר נלך לים עם החברים.
तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है। कल हम दिल्ली जाएंगे और संग्रहालय देखेंगे।
สุนัขจิ้งจอกสีน้ำตาลกระโดดข้ามสุนัขขี้เกียจ พรุ่งนี้เราจะไปทะเล
Con cáo nâu nhanh nhẹn nhảy qua con chó lười biếng. Ngày mai chúng tôi sẽ đi Hà Nội.
Emoji and symbols: 😀 🎉 👍 ❤️ 🚀 ✅ ⚠️ → ← ≤ ≥ ≠ ± × ÷ € £ ¥ © ® ™ … “quoted” ‘single’ — dash
)K3TEXT";

constexpr std::string_view kMore = R"K3TEXT(
The committee reviewed the proposal and agreed to continue the project for another year. The first phase
delivered a working prototype; the second phase will focus on performance, reliability and documentation.
Each team will report its progress at the end of every month, and the results will be published openly so
that other researchers can reproduce them. Reproducibility matters: a result that cannot be repeated is an
anecdote, not a measurement. For this reason every number in the report states the machine, the commit and
the command that produced it.

She opened the window and looked at the garden. The roses were in bloom, the grass was wet with dew, and a
blackbird was singing on the roof of the shed. It was going to be a beautiful day. She made breakfast,
packed her bag, and walked to the station, where the train was already waiting on the platform.

Dear customer, thank you for your order. Your package has been shipped and should arrive within three to
five working days. You can track your delivery online using the reference number below. If you have any
questions, please do not hesitate to contact our support team. Kind regards, the customer service team.

Tips for writing clear code: choose names that explain what a thing is for; keep functions short and give
each one a single job; write comments that say why, not what; test the edge cases, such as empty inputs,
very large values, and invalid data; and never ignore an error. When something goes wrong, the message
should say what happened and where, so that the person reading it can fix the problem quickly.

The history of computing is full of surprising turns. Early machines filled entire rooms and used vacuum
tubes that burned out every few hours. The transistor made computers smaller, faster and more reliable, and
the integrated circuit put thousands, then millions, then billions of transistors on a single chip. Today a
phone in your pocket is more powerful than the supercomputers of the past, and the cost of storing a
gigabyte of data has fallen from thousands of dollars to a few cents.
)K3TEXT";

}  // namespace

std::string_view bpe_training_text() {
  static const std::string text = [] {
    std::string t;
    for (auto part : {kEnglish, kCode, kWorld, kMore}) t += part;
    return t;
  }();
  return text;
}

}  // namespace k3::detail
