"""Writes corpus.jsonl: the strings the tokenizer tests compare against HF transformers.

Hand-written lines per script and topic, then systematic variants (numbers of every
length, whitespace runs, contractions in every case, control-token strings, combining
marks, emoji sequences) and seeded random mixes. Deterministic: the committed file must
equal this script's output (a test checks). Run: python -m tests.data.tokenizer_corpus.generate
"""

import json
import random
from pathlib import Path

CORPUS = Path(__file__).with_name("corpus.jsonl")

ENGLISH = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "Write a Python function that checks whether a number is prime.",
    "It's a beautiful day, isn't it? We'll see; they'd know, I'm sure.",
    "IT'S LOUD. WE'LL GO. THEY'D SAY. I'M HERE. YOU'RE LATE. WE'VE DONE IT. DON'T.",
    "She said: \"No.\" Then -- after a pause -- 'maybe'.",
    "e-mail: someone@example.com, URL: https://example.org/path?q=1&r=two#frag",
    "Prices: $3.50, €12,00, £7, ¥1000, 50% off!!!",
    "A sentence with  two spaces and   three spaces.",
    "Trailing spaces   ",
    "   Leading spaces",
    "Tabs\tbetween\t\twords",
    "Line one\nLine two\n\nLine four",
    "Windows line\r\nendings\r\n\r\n",
    "Mixed\r\n\n\r whitespace \t\n end",
    "ALL CAPS SENTENCE WITH NUMBERS 123 AND SYMBOLS #@!",
    "camelCaseIdentifier snake_case_identifier kebab-case-identifier",
    "Ellipsis... and em—dash and en–dash",
    "Quotes “curly” and ‘single’ and «guillemets»",
    "Bullet points:\n- one\n- two\n  - nested\n* star",
    "1. First\n2. Second\n10. Tenth",
    "Parenthetical (like this) [and this] {and this}",
    "Repeated letters: aaaaaaaaaaaaaaaaaaaa bbbbbbbbbbbb",
    "Mr. O'Neil's dog's bone",
    "rock 'n' roll, 'tis the season, y'all",
    "The year 2024 had 366 days; 2023 had 365.",
    "Version 1.2.3-beta+build.45",
    "Temperature: -40°C = -40°F",
    "Math: a^2 + b^2 = c^2, ∑ x_i, ∫ f(x) dx, √2 ≈ 1.414",
    "Emoji in text 😀 here",
    "Some punctuation: ?!.,;:'\"`~",
    "<html><body><p>Hi</p></body></html>",
    "Markdown **bold** _italic_ `code` [link](http://x.y)",
    "| table | row |\n|---|---|\n| a | b |",
    "A very long word: pneumonoultramicroscopicsilicovolcanoconiosis",
    "Short",
    "a",
    " ",
    "",
    "\n",
    "?",
]

CHINESE = [
    "你好",
    "你好，世界！",
    "今天天气很好，我们去公园散步吧。",
    "人工智能正在改变我们的生活方式。",
    "请用Python写一个判断质数的函数。",
    "这是一个测试：数字123和英文ABC混在一起。",
    "《红楼梦》是中国古典小说的巅峰之作。",
    "繁體中文與簡體中文不同。",
    "他说：“我明天再来。”",
    "一二三四五六七八九十百千万亿",
]

JAPANESE = [
    "こんにちは世界",
    "今日はいい天気ですね。",
    "カタカナとひらがなと漢字が混ざっています。",
    "ｶﾀｶﾅ（半角）とＡＢＣ（全角）",
    "東京スカイツリーは高さ634メートルです。",
    "吾輩は猫である。名前はまだ無い。",
]

KOREAN = [
    "안녕하세요",
    "오늘 날씨가 정말 좋네요.",
    "한국어와 English를 섞어서 씁니다.",
    "대한민국의 수도는 서울입니다.",
]

ARABIC = [
    "مرحبا بالعالم",
    "اللغة العربية جميلة جداً.",
    "العدد ١٢٣ والعدد 456",
    "هذا نص عربي مع English كلمات.",
]

HINDI = [
    "नमस्ते दुनिया",
    "भारत एक विशाल देश है।",
    "हिन्दी और English का मिश्रण",
    "संख्या १२३ और 456",
]

THAI = [
    "สวัสดีครับ",
    "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ",
    "ฉันชอบกินข้าวผัด",
]

OTHER_SCRIPTS = [
    "Привет, мир! Как дела?",
    "Ελληνικά: Καλημέρα κόσμε",
    "עברית: שלום עולם",
    "Tiếng Việt: Xin chào thế giới",
    "Türkçe: İstanbul'da ılık bir gün",
    "Deutsch: Grüße aus München, Straße",
    "Français : « Ça va ? » dit-il, à l'hôtel.",
    "Español: ¿Qué tal? ¡Muy bien!",
    "Polski: Zażółć gęślą jaźń",
    "Ελληνικά και Русский και English",
    "ქართული ენა",
    "Հայերեն լեզու",
    "ᚠᚢᚦᚨᚱᚲ runes",
    "Ꭰ Cherokee ᏣᎳᎩ",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝒮𝒸𝓇𝒾𝓅𝓉",
    "Zero\u200bwidth\u200bspace and non\u00a0breaking space",
    "Soft\u00adhyphen and\u2028line separator",
    "RTL mark \u200f and LTR mark \u200e here",
    "BOM \ufeff inside",
    "Private use \ue000\uf8ff chars",
    "Noncharacter \ufffe? no: replacement \ufffd char",
]

EMOJI = [
    "😀",
    "😂🤣",
    "👍👍🏻👍🏿",
    "❤️",
    "🫠",
    "🧑‍💻",
    "👨‍👩‍👧‍👦",
    "👩🏽‍🚀",
    "🏳️‍🌈",
    "🏴‍☠️",
    "🇨🇳🇯🇵🇰🇷🇺🇸🇩🇪",
    "🇫🇷",
    "1️⃣2️⃣#️⃣",
    "☕ coffee",
    "🐍 python",
    "🚀🚀🚀",
    "Family: 👨‍👨‍👧 and 👩‍❤️‍💋‍👨",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿 Scotland",
    "✅ done ❌ failed ⚠️ warning",
]

CODE = [
    "def is_prime(n: int) -> bool:\n    if n < 2:\n        return False\n"
    "    for i in range(2, int(n ** 0.5) + 1):\n        if n % i == 0:\n            return False\n"
    "    return True\n",
    "import numpy as np\nx = np.zeros((3, 4), dtype=np.float32)  # shape [3, 4]\n",
    "class Foo(Bar):\n\tdef __init__(self):\n\t\tsuper().__init__()\n",
    '#include <stdio.h>\nint main(void) {\n    printf("Hello, %s!\\n", "world");\n'
    "    return 0;\n}\n",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n"
    '    println!("{:?}", v);\n}\n',
    'func main() {\n\tfmt.Println("hi")\n\tif err != nil {\n\t\treturn err\n\t}\n}\n',
    "const add = (a, b) => a + b;\nconsole.log(`sum=${add(1, 2)}`);\n",
    'public static void main(String[] args) { System.out.println("x" + args.length); }',
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
    '#!/bin/bash\nfor f in *.txt; do\n  echo "$f" | tr a-z A-Z\ndone\n',
    '{"key": [1, 2.5, -3e10, true, null], "nested": {"a": "b"}}',
    "<div class=\"row\">\n  <span id='x'>&amp;&lt;&gt;</span>\n</div>",
    "x = [i**2 for i in range(10) if i % 2 == 0]",
    "    indented four\n        indented eight\n\t\ttabbed",
    "if (a != b && c <= d || e >= f) { return !g; }",
    "a += 1; b -= 2; c *= 3; d /= 4; e %= 5; f **= 6; g //= 7",
    'regex = r"^(?:[a-z0-9]+\\.)*[a-z]{2,}$"',
    "// comment\n/* block\n   comment */\n# hash comment\n-- sql comment",
    "matrix[i][j] = matrix[i - 1][j - 1] + 1;",
    'print(f"{value!r:>10}")',
    "λx.λy.x y ≡ K",
    "SELECT * FROM t;\r\nGO\r\n",
    "    \n    \n\n",
    "}}}}]]]])))){{{{",
    "0x1F 0b1010 0o777 1_000_000 3.14e-10 .5 5.",
]

CONTROL_TEXT = [
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "Please ignore <|im_end|> and continue",
    "<|vision_start|><|image_pad|><|vision_end|>",
    "<|im_start|><|im_start|><|im_end|><|im_end|>",
    "<|im_end",
    "|im_end|>",
    "<|IM_END|>",
    "< |im_end| >",
    '<tool_call>\n{"name": "f"}\n</tool_call>',
    "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>",
    "text<|endoftext|>text",
    "<|eot_id|><|begin_of_text|><|end_of_text|>",
]

COMBINING = [
    "e\u0301",
    "cafe\u0301",
    "A\u030a",
    "n\u0303o",
    "u\u0308ber",
    "o\u0302\u0323",
    "Vie\u0323\u0302t Nam",
    "\u1100\u1161\u11a8",
    "Z\u0335\u0322a\u0334l\u0337g\u0336o",
    "a\u0300\u0301\u0302\u0303\u0304",
    "\u0301 leading combining mark",
    "x\u20d7 vector",
]

WORDS = [
    "hello",
    "world",
    "Python",
    "數據",
    "データ",
    "데이터",
    "بيانات",
    "डेटा",
    "ข้อมูล",
    "данные",
    "🙂",
    "42",
    "3.14",
    "don't",
    "IT'S",
    "x_y",
    "<tag>",
    "naïve",
    "straße",
    "ﬁ",
    "Ⅻ",
    "½",
]

SEPARATORS = [" ", "  ", "\n", "\r\n", "\t", "", " \n ", ", ", ". ", "\n\n\n", "   \t"]


def _numbers() -> list[str]:
    out = []
    for length in range(1, 41):
        out.append("".join(str((i * 7 + length) % 10) for i in range(length)))
        out.append("9" * length)
        out.append("1" + "0" * (length - 1))
    out += [f" {n}" for n in (0, 7, 42, 123, 1234, 12345, 123456, 1234567)]
    out += [f"{n:,}" for n in (1000, 1234567, 9876543210)]
    out += [
        "-1",
        "+1",
        "1.0",
        "0.000001",
        "1e-9",
        "6.022e23",
        "3/4",
        "12:30",
        "2024-01-31",
        "#1",
        "1st",
        "2nd",
    ]
    out += ["١٢٣٤٥", "१२३४५", "一二三", "①②③", "Ⅳ", "¹²³", "１２３４５"]
    return out


def _whitespace() -> list[str]:
    out = []
    for unit in (" ", "\n", "\t", "\r\n", " \n", "\n ", "\r", "\u3000"):
        for count in range(1, 9):
            run = unit * count
            out += [run, f"a{run}b", f"{run}a", f"a{run}"]
    return out


def _contractions() -> list[str]:
    out = []
    for suffix in ("s", "t", "re", "ve", "m", "ll", "d"):
        for form in (suffix, suffix.upper(), suffix.capitalize()):
            out += [f"it'{form}", f"IT'{form}", f" they'{form} go", f"'{form}", f"x '{form}"]
    return out


def _variants(line: str) -> list[str]:
    return [line, " " + line, line + "\n", line.upper(), f"\t{line}  ", f"{line} {line}"]


def _mixes(count: int) -> list[str]:
    rng = random.Random(1234)
    out = []
    for _ in range(count):
        parts = [rng.choice(WORDS) + rng.choice(SEPARATORS) for _ in range(rng.randint(1, 8))]
        out.append("".join(parts))
    return out


def corpus() -> list[str]:
    hand = (
        ENGLISH + CHINESE + JAPANESE + KOREAN + ARABIC + HINDI + THAI + OTHER_SCRIPTS + EMOJI + CODE
    )
    lines = [variant for line in hand for variant in _variants(line)]
    lines += CONTROL_TEXT + [f"say {c} now" for c in CONTROL_TEXT]
    lines += COMBINING + [f" {c} " for c in COMBINING]
    lines += _numbers() + _whitespace() + _contractions() + _mixes(900)
    seen: set[str] = set()
    return [line for line in lines if not (line in seen or seen.add(line))]


def render() -> str:
    return "".join(json.dumps(line, ensure_ascii=True) + "\n" for line in corpus())


if __name__ == "__main__":
    CORPUS.write_text(render(), encoding="ascii")
    print(f"{CORPUS}: {len(corpus())} strings")
