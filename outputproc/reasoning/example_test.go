package reasoning_test

import (
	"fmt"

	"github.com/sluice-llm/sluice/outputproc/reasoning"
)

// DeepSeek-R1 output, whose <think> was opened by the prompt, split with
// the closing tag across deltas.
func Example() {
	p, err := reasoning.New("deepseek_r1", reasoning.Options{})
	if err != nil {
		panic(err)
	}
	for _, delta := range []string{"2+2 is 4.</th", "ink>\n\nThe answer", " is 4."} {
		r, c := p.Add(delta)
		fmt.Printf("reasoning %q content %q\n", r, c)
	}
	r, c := p.Finish()
	fmt.Printf("finish %q %q\n", r, c)
	// Output:
	// reasoning "2+2 is 4." content ""
	// reasoning "" content "The answer"
	// reasoning "" content " is 4."
	// finish "" ""
}
