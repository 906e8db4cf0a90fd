package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
)

func main() {
	var inputs []string
	if err := json.NewDecoder(os.Stdin).Decode(&inputs); err != nil {
		panic(err)
	}
	out := make([][2]string, 0, len(inputs))
	for _, s := range inputs {
		out = append(out, [2]string{s, strconv.Quote(s)})
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	fmt.Println(string(b))
}
