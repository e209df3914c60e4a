#!/usr/bin/env python3
# gen-tokenizer-corpus.py - generates tests/data/tokenizer-corpus.txt, the
# strings tests/test-tokenizer-ref.sh encodes with rkmojo and with the
# reference (@huggingface/tokenizers). The output is committed; rerun only
# to change the corpus (the random part is seeded, so it is reproducible).
import random
random.seed(20240611)
S = []
add = S.append
prose = [
 "The quick brown fox jumps over the lazy dog.",
 "Hello world", " Hello world", "Hello World!", "Hello, world!", "hello   world", "HELLO WORLD",
 "It's a beautiful day, isn't it? We'll see. They've gone; I'd say you're right. He'LL do it. SHE'S HERE. I'M fine. WE'VE, THEY'RE, YOU'D",
 "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D 'x 'Ll 'rE",
 "don't won't can't shouldn't y'all o'clock rock'n'roll",
 "Once upon a time, in a land far, far away, there lived a king who had three daughters.",
 "Mixture-of-experts models route each token to a few experts; the rest stay on disk.",
 "The year 1984 was followed by 1985, and 2024-06-11T12:34:56Z is an ISO timestamp.",
 "Price: $1,234.56 (incl. 19% VAT) -- or €999,99; ¥100000; £3.50",
 "E-mail me at someone@example.com or visit https://example.org/path?query=1&x=y#frag",
 "Mr. Smith went to Washington D.C. on Jan. 5th, 2021 at 3:45 p.m.",
 "A sentence with trailing spaces   ", "   leading spaces", "\ttab\tseparated\tvalues\t",
 "Line one\nLine two\r\nLine three\rLine four\n\n\nEnd.",
 "Bullet list:\n - first item\n - second item\n   * nested\n",
 "Markdown **bold** _italic_ `code` [link](http://x.y) # Heading\n## Sub-heading",
 "Question: What is 2+2? Answer: 4.",
 "supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
 "ALL CAPS SENTENCE WITH NUMBERS 123 AND SYMBOLS !@#",
 "camelCaseIdentifier snake_case_identifier kebab-case-identifier SCREAMING_SNAKE PascalCase",
]
for p in prose: add(p)
code = [
 "def add(a, b):\n    return a + b\n",
 "for (int i = 0; i < n; i++) {\n\tsum += a[i] * b[i];\n}\n",
 "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }",
 "const x = {a: 1, 'b': [2, 3], \"c\": null}; // comment\n",
 "if x != y and not z:\n        raise ValueError(f\"bad {x!r}\")\n",
 "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;",
 "<html><body><div class=\"main\">Hi &amp; bye</div></body></html>",
 "fn main() -> Result<(), Box<dyn Error>> { let v: Vec<u8> = vec![1, 2, 3]; Ok(()) }",
 "    \n        \n            return;\n",
 "x+=1;y-=2;z*=3;w/=4;a%=5;b**=6;c//=7;d<<=8;e>>=9;f&=10;g|=11;h^=12",
 "a==b!=c<=d>=e&&f||g->h::i...j",
 "{\"key\": [1, 2.5, -3e10, true, false, null], \"nested\": {\"k\": \"v\"}}",
 "$ ls -la | grep '^d' | awk '{print $9}' > /tmp/out.txt 2>&1",
 "/* multi\n * line\n * comment */",
 "@decorator\nclass Foo(Bar, metaclass=Meta):\n    __slots__ = ()\n",
]
for c in code: add(c)
intl = [
 "你好，世界！", "我想在apple工作1314151天～", "日本語のテキストとカタカナ、ひらがな。", "東京タワーは333メートルです。",
 "안녕하세요, 세계!", "한국어 텍스트입니다.", "مرحبا بالعالم", "اللغة العربية جميلة جداً ١٢٣٤٥٦٧٨٩٠",
 "שלום עולם", "Привет, мир! Как дела?", "нещо на Български", "Ελληνικά γράμματα: αβγδε ΑΒΓΔΕ",
 "हिन्दी पाठ का उदाहरण", "ภาษาไทยเป็นภาษาที่สวยงาม", "Tiếng Việt có dấu: Cửa Việt", "Ärger über Öl und Übermut: ß",
 "Français : où est l'hôtel ? À bientôt !", "Español: ¿Dónde está la biblioteca? ¡Olé!", "Português: ação, coração, não",
 "Türkçe: ığüşöç İĞÜŞÖÇ", "Polski: zażółć gęślą jaźń", "ქართული ენა", "Հայերեն", "ኢትዮጵያ", "ᏣᎳᎩ",
 "ក្នុងភាសាខ្មែរ", "བོད་ཡིག", "සිංහල", "தமிழ் மொழி", "తెలుగు", "ਪੰਜਾਬੀ", "ગુજરાતી", "বাংলা ভাষা",
 "中文English混合text测试123", "ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ　１２３！", "半角ｶﾀｶﾅ", "『引用』「括弧」【強調】〈角〉《書名》",
]
for c in intl: add(c)
emoji = [
 "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ (only emoji that has its own token)",
 "👨‍👩‍👧‍👦 family 🏳️‍🌈 flag 👍🏽 skin tone", "🦙🦙🦙 llamas", "❤️💔💯🔥✨", "🇺🇸🇯🇵🇩🇪 flags", "emoji at end 😀",
 "☃ ★ ☆ ♠ ♣ ♥ ♦ ♪ ♫ ☎ ☺", "😀😁😂🤣😃😄😅😆😉😊😋😎😍😘",
]
for e in emoji: add(e)
nums = ["3", "33", "333", "3333", "33333", "333333", "3333333", "33333333", "333333333",
 "1234567890", "3.14159265358979", "1,000,000", "-42", "+7", "0x1F 0b1010 0o777", "1e-10 6.02e23",
 "٣٤٥ ۱۲۳ ०१२ ๑๒๓", "①②③ ⅠⅡⅢⅫ ½¼¾ ²³¹", "１２３４５", "3..3 3...3 3.3"]
for n in nums: add(n)
ws = ["", " ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "\t\n", "\r\n", " \n", "\n ", " \n \n", "\u00a0", "\u3000",
 "a\u00a0b", "a\u2009b\u200bc", "x" + " " * 50 + "y", " " * 200, "\n" * 100, "\t" * 30 + "x", "a" + " \t" * 40 + "b",
 " " * 17 + "\n" * 3 + " " * 5 + "end", "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n",
 "    Hello\n    Hello", " (", "\n =", "' era", "!!!!!!", "??!!..,,", "------=======",
 "'''''''```````\"\"\"\"......!!!!!!??????"]
for w in ws: add(w)
odd = [
 "e\u0301 (e + combining acute) vs \u00e9", "A\u030a \u212b \u00c5", "\u1100\u1161\u11a8 jamo vs \uac01",
 "n\u0303o\u0308\u0304", "a\u0328\u0301", "\u0041\u0300\u0301\u0302\u0303\u0304", "\ufb01 ligature \ufb02",
 "zero\u200bwidth\u200cnon\u200djoiner", "\u202eRTL override\u202c", "\u200e\u200f marks", "\ufeffBOM at start",
 "soft\u00adhyphen", "\u0085next line", "control\u0001\u0002\u0007chars\u001b[0m", "tab\u000bvt\u000cff",
 "\ue000\uf8ff private use", "\U000f0000 plane 15", "\U0001d400\U0001d401 math bold", "\U00020000 CJK ext B",
 "\u2028line sep\u2029para sep", "ſ 'ſ ﬅ", "K Kelvin \u212a and Ω Ohm \u2126", "\u0130\u0131 dotted",
 "Ǆǅǆ ǈ titlecase", "ⓐⓑⓒ circled", "\u00b5 micro \u03bc mu", "\u2160\u2161 roman", "\u0660\u06f0 digits",
 "<s>", "</s>", "<unk>", "<|im_start|>user\nhi<|im_end|>", "<|endoftext|>", "<|begin_of_text|>",
 "<bos><eos><pad>", "<start_of_turn>user\nHello<end_of_turn>", "<think>\nreasoning\n</think>\nanswer",
 "<｜begin▁of▁sentence｜>", "▁▁already▁metaspace", "<0x41>", "[INST] hi [/INST]",
 "<|im_start|><|im_start|>", "text<|im_end|>text", "<s>Hello world</s>", "a</s>b c</s> d", "<unk> x<unk>y",
 "<s> leading space after bos", "<|begin_of_text|>Hi<|eot_id|> there", "<bos>text<eos> more", "x<｜end▁of▁sentence｜> y", "<|im_start", "im_start|>", "<<|im_start|>>",
]
for o in odd: add(o)
# random mixtures
pools = {
 "latin": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZéèêëàâäôöûüçñ",
 "digits": "0123456789",
 "punct": ".,;:!?'\"()[]{}<>-_/\\|@#$%^&*+=~`",
 "space": "     \t\n",
 "cjk": "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从",
 "kana": "あいうえおかきくけこアイウエオカキクケコー",
 "hangul": "가나다라마바사아자차카타파하",
 "arabic": "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
 "cyr": "абвгдежзийклмнопрстуфхцчшщъыьэюя",
 "emoji": ["😀", "🚀", "👍", "❤️", "🦙", "✅", "🇺🇸", "👨‍💻"],
 "marks": "\u0300\u0301\u0302\u0308\u0323\u064b\u0651",
}
keys = list(pools)
for k in range(260):
    n = random.randint(1, 60)
    ks = random.sample(keys, random.randint(1, 4))
    s = ""
    for _ in range(n):
        p = pools[random.choice(ks)]
        s += random.choice(p)
    add(s)
# long strings
add("The quick brown fox. " * 50)
add(" " * 1000 + "x")
add("\n" * 300 + "end")
add("a" * 500)
add("1" * 100)
add("你好" * 100)
add("😀" * 60)
sep = "\n__ggml_vocab_test__\n"
for s in S:
    assert sep not in s
    assert "\ud800" not in s
import os
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokenizer-corpus.txt"), "w", encoding="utf-8", newline="").write("".join(s + sep for s in S))
print(len(S), "strings")
