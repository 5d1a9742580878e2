// bench/definition-rule.ts: the rule by which the default-model bench calls a definition
// right (issue #29), checked against 20 answers judged by hand — exact and truncated glosses,
// a synonym, paraphrases, and the wrong answers the shipped model gives ("A dog is a person
// who is the act of stopping."). `human` is the hand verdict; where the rule disagrees the
// case says so (`rule`), so the rule's known errors are stated, not hidden.
import assert from "node:assert/strict";
import { test } from "node:test";
import { contentWords, isRefusal, judgeDefinition, type Sense } from "../../bench/definition-rule.js";

// The top senses of tools/train-default-model/vocab.jsonl for these words (WordNet 3.0 glosses).
const SENSES: Record<string, Sense[]> = {
  dog: [{ pos: "n", definition: "a member of the genus Canis (probably descended from the common wolf) that has been domesticated by man since prehistoric times; occurs in many breeds", synonyms: ["domestic dog", "Canis familiaris"] }],
  happy: [{ pos: "a", definition: "enjoying or showing or marked by joy or pleasure", synonyms: [] }],
  run: [{ pos: "v", definition: "move fast by using one's feet, with one foot off the ground at any given time", synonyms: [] }],
  house: [{ pos: "n", definition: "a dwelling that serves as living quarters for one or more families", synonyms: [] }],
  cold: [{ pos: "a", definition: "having a low or inadequate temperature or feeling a sensation of coldness or having been made cold by e.g. ice or refrigeration", synonyms: [] }],
  water: [{ pos: "n", definition: "binary compound that occurs at room temperature as a clear colorless odorless tasteless liquid; freezes into ice below 0 degrees centigrade and boils above 100 degrees centigrade; widely used as a solvent", synonyms: ["H2O"] }],
  book: [{ pos: "n", definition: "a written work or composition that has been published (printed on pages bound together)", synonyms: [] }],
  person: [{ pos: "n", definition: "a human being", synonyms: ["individual", "someone", "somebody", "mortal"] }],
  bread: [{ pos: "n", definition: "food made from dough of flour or meal and usually raised with yeast or baking powder and then baked", synonyms: ["breadstuff", "staff of life"] }],
  tree: [{ pos: "n", definition: "a tall perennial woody plant having a main trunk and branches forming a distinct elevated crown; includes both gymnosperms and angiosperms", synonyms: [] }],
};

interface Case {
  word: string;
  answer: string;
  human: boolean;
  /** The rule's verdict where it differs from the hand verdict. */
  rule?: boolean;
}

const CASES: Case[] = [
  // Right: the gloss, whole or cut short, with or without an example; a synonym.
  { word: "dog", answer: "A dog is a member of the genus Canis (probably descended from the common wolf) that has been domesticated by man since prehistoric times; occurs in many breeds.", human: true },
  { word: "dog", answer: "A dog is a member of the genus Canis.", human: true },
  { word: "happy", answer: 'Happy means enjoying or showing or marked by joy or pleasure. For example: "a happy smile".', human: true },
  { word: "run", answer: "To run is to move fast by using one's feet.", human: true },
  { word: "house", answer: "A house is a dwelling that serves as living quarters for one or more families.", human: true },
  { word: "person", answer: "A person is a human being.", human: true },
  { word: "person", answer: "Another word for person is individual.", human: true },
  { word: "bread", answer: "Bread is food made from dough of flour and baked.", human: true },
  { word: "water", answer: "Water is a clear colorless odorless tasteless liquid.", human: true },
  // Right, but in other words than WordNet's: the rule, lexical, fails them.
  { word: "house", answer: "A house is a building where people live.", human: true, rule: false },
  { word: "cold", answer: "Cold means having a low temperature.", human: true, rule: false },
  // Wrong: the shipped model's answers, another word's gloss, a refusal, a loop.
  { word: "dog", answer: "A dog is a person who is an arrangement of the eye.", human: false },
  { word: "dog", answer: "A dog is a person who is the act of stopping.", human: false },
  { word: "water", answer: "Water is the largest city in central Asia.", human: false },
  { word: "book", answer: "A book is a kind of person.", human: false },
  { word: "happy", answer: "Happy means to make a happy.", human: false },
  { word: "tree", answer: "A tree is a written work or composition that has been published.", human: false },
  { word: "cold", answer: "I don't know the word cold. I only know common English words; ask me about another one.", human: false },
  { word: "run", answer: "To run is to run a run of a run of a run.", human: false },
  { word: "bread", answer: "Bread is a member of the genus of a person who is food.", human: false },
];

test("the definition rule agrees with the hand verdict on 18 of 20 answers, and passes none judged wrong", () => {
  assert.equal(CASES.length, 20);
  for (const c of CASES) {
    const got = judgeDefinition(c.answer, c.word, SENSES[c.word]!) !== null;
    assert.equal(got, c.rule ?? c.human, `${c.word}: ${c.answer}`);
  }
  assert.equal(CASES.filter((c) => c.rule === undefined).length, 18);
  assert.ok(CASES.every((c) => c.human || c.rule === undefined), "no false pass is tolerated");
});

test("content words drop stop words and the asked-about word, and meet across -s/-ed/-ing", () => {
  assert.deepEqual([...contentWords("A dog is a member of the dogs' genus", "dog")].sort(), ["genu", "member"]);
  assert.deepEqual([...contentWords("domesticated", "x")], [...contentWords("domesticate", "x")]);
});

test("refusals are recognized and never count as a definition", () => {
  assert.ok(isRefusal("Sorry, I don't know that word."));
  assert.ok(isRefusal("I do not know the word abhenry."));
  assert.ok(!isRefusal("A dog is a member of the genus Canis."));
  assert.equal(judgeDefinition("I don't know, a member of the genus Canis.", "dog", SENSES.dog!), null);
});
