package serve

import (
	"math/rand/v2"
	"os"
)

type randSource = rand.Rand

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

func readFile(path string) ([]byte, error) { return os.ReadFile(path) }
